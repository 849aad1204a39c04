//! The real proxy in-process ([`Shellac`]): started from a config or a file on loopback ports,
//! its counters and admin answers, reloaded, stopped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shellac::config::Config;
use shellac::server::{self, Running};

use super::client::{get, request};

/// The real proxy, in-process, on ephemeral loopback ports.
pub struct Shellac {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    running: Option<Running>,
}

impl Shellac {
    /// A Shellac started by the test itself (`server::start` with a config of its own).
    #[allow(dead_code)]
    pub fn from_running(running: Running) -> Shellac {
        Shellac {
            addr: running.listen[0],
            admin: running.admin.expect("an admin listener"),
            running: Some(running),
        }
    }

    /// Starts Shellac in front of `origin`; `tweak` adjusts the config first.
    pub async fn start(origin: SocketAddr, tweak: impl FnOnce(&mut Config)) -> Shellac {
        let mut config = Config::embedded_default();
        config.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
        config.server.admin = Some("127.0.0.1:0".parse().unwrap());
        config.backends[0].host = origin.ip().to_string();
        config.backends[0].port = origin.port();
        tweak(&mut config);
        assert!(
            config.validate().is_empty(),
            "test config invalid: {:?}",
            config.validate()
        );
        let running = server::start(Arc::new(config))
            .await
            .expect("shellac starts");
        Shellac {
            addr: running.listen[0],
            admin: running.admin.unwrap(),
            running: Some(running),
        }
    }

    /// Starts Shellac with a first backend that has no host and port (a document root, a
    /// Unix socket): `tweak` gives it its kind or address and adjusts the rest of the config.
    pub async fn start_hostless(tweak: impl FnOnce(&mut Config)) -> Shellac {
        Shellac::start("127.0.0.1:9".parse().unwrap(), |c| {
            c.backends[0].host = String::new();
            tweak(c);
        })
        .await
    }

    /// Starts Shellac with a first backend that serves the files under `root`
    /// (`protocol = "files"`); `tweak` adjusts the config after that.
    pub async fn start_files(root: &std::path::Path, tweak: impl FnOnce(&mut Config)) -> Shellac {
        Shellac::start_hostless(|c| {
            let b = &mut c.backends[0];
            b.protocol = shellac::config::BackendProtocol::Files;
            b.root = Some(root.to_path_buf());
            tweak(c);
        })
        .await
    }

    /// Starts Shellac from a config file (so `POST /reload` re-reads it). The file should
    /// listen on `127.0.0.1:0` and put the admin listener on `127.0.0.1:0`.
    pub async fn start_reloadable(path: &std::path::Path) -> Shellac {
        Shellac::try_start_reloadable(path)
            .await
            .expect("shellac starts")
    }

    /// Like [`Shellac::start_reloadable`], with the start-up error instead of a panic (a
    /// fixed port a previous test's Shellac has not released yet).
    pub async fn try_start_reloadable(path: &std::path::Path) -> anyhow::Result<Shellac> {
        let mut config =
            Config::load(path).unwrap_or_else(|e| panic!("test config invalid: {e:?}"));
        let program = shellac::vcl::attach::attach(&mut config, None)
            .unwrap_or_else(|e| panic!("test VCL invalid: {e:?}"));
        let running = server::start_with(
            Arc::new(config),
            program,
            shellac::reload::ConfigSource::File(path.to_path_buf()),
            shellac::config::CliOverrides::default(),
        )
        .await?;
        Ok(Shellac {
            addr: running.listen[0],
            admin: running.admin.unwrap(),
            running: Some(running),
        })
    }

    /// Starts Shellac on an example config file, pointed at `origin` (first backend) and at
    /// ephemeral ports; `tweak` adjusts it further.
    pub async fn start_file(
        path: &str,
        origin: SocketAddr,
        tweak: impl FnOnce(&mut Config),
    ) -> Shellac {
        let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
        let mut config =
            Config::load(std::path::Path::new(&full)).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        config.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
        config.server.admin = Some("127.0.0.1:0".parse().unwrap());
        config.backends[0].host = origin.ip().to_string();
        config.backends[0].port = origin.port();
        tweak(&mut config);
        let running = server::start(Arc::new(config))
            .await
            .expect("shellac starts");
        Shellac {
            addr: running.listen[0],
            admin: running.admin.unwrap(),
            running: Some(running),
        }
    }

    /// `POST /reload`: (status, JSON body).
    pub async fn reload(&self) -> (u16, serde_json::Value) {
        let resp = request(self.admin, "POST", "/reload", &[], b"").await;
        let v = serde_json::from_slice(&resp.body).unwrap_or(serde_json::Value::Null);
        (resp.status, v)
    }

    /// TLS addresses accepting client connections now, in `[[tls]]` order.
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.running
            .as_ref()
            .map(|r| r.live.listening_tls().into_iter().map(|(_, a)| a).collect())
            .unwrap_or_default()
    }

    /// Addresses accepting client connections now.
    pub fn listening(&self) -> Vec<SocketAddr> {
        self.running
            .as_ref()
            .map(|r| r.live.listening())
            .unwrap_or_default()
    }

    /// All counters and gauges from `GET /stats` on the admin listener (the integer values;
    /// ratios are read with [`Shellac::ratio`]).
    pub async fn stats(&self) -> HashMap<String, u64> {
        self.stats_json()
            .await
            .into_iter()
            .filter_map(|(k, v)| v.as_u64().map(|v| (k, v)))
            .collect()
    }

    /// `GET /stats` as parsed JSON values.
    pub async fn stats_json(&self) -> HashMap<String, serde_json::Value> {
        let resp = get(self.admin, "/stats").await;
        assert_eq!(resp.status, 200);
        serde_json::from_slice(&resp.body).expect("stats JSON")
    }

    /// A fractional value of `/stats`, e.g. `hit_ratio_10s`.
    pub async fn ratio(&self, name: &str) -> f64 {
        self.stats_json()
            .await
            .get(name)
            .and_then(|v| v.as_f64())
            .unwrap_or_else(|| panic!("no number {name}"))
    }

    pub async fn stat(&self, name: &str) -> u64 {
        *self
            .stats()
            .await
            .get(name)
            .unwrap_or_else(|| panic!("no counter {name}"))
    }

    /// Reopens the access log, as SIGUSR1 does.
    pub fn reopen_logs(&self) {
        if let Some(r) = &self.running {
            r.reopen_logs();
        }
    }

    /// Graceful shutdown with `grace` for requests in flight.
    pub async fn stop_with(mut self, grace: Duration) {
        if let Some(r) = self.running.take() {
            r.shutdown(grace).await;
        }
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown(Duration::from_secs(1)).await;
        }
    }
}
