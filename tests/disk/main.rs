//! The disk tier end to end: restarts (clean and `kill -9` of the real binary), corruption,
//! a filesystem without room, a 21 MB object streamed from disk, expiry across a restart.
//! The helpers are here; the tests in `restarts`, `kill_9`, `bans` and `storage` (test names
//! `MODULE::NAME`).

mod bans;
#[path = "../common/mod.rs"]
mod common;
mod kill_9;
mod restarts;
mod storage;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::binary::Served;
use common::*;
use shellac::config::units::{Dur, Size};
use shellac::config::{Admission, Config, DiskConfig};

fn disk(config: &mut Config, path: &Path, size: u64, region: u64, admission: Admission) {
    config.storage.disk = Some(DiskConfig {
        path: path.to_path_buf(),
        size: Size(size),
        region_size: Size(region),
        admission,
        on_open_error: Default::default(),
    });
}

/// Waits (bounded) until the disk tier has indexed at least `n` objects.
async fn wait_disk_objects(shellac: &Shellac, n: u64) {
    for _ in 0..400 {
        if shellac.stat("n_object_disk").await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "disk tier indexed {} objects, expected {n}",
        shellac.stat("n_object_disk").await
    );
}

fn body_of(path: &str) -> String {
    format!("body of {path} ").repeat(300)
}

/// The real binary on a config file (`common::binary::Served`), with the counters these
/// tests read.
struct Proc(Served);

impl std::ops::Deref for Proc {
    type Target = Served;
    fn deref(&self) -> &Served {
        &self.0
    }
}

impl Proc {
    fn start(config: &Path) -> Proc {
        Proc(Served::serve(&[
            "--config",
            config.to_str().expect("temp paths are UTF-8"),
        ]))
    }

    async fn stat(&self, name: &str) -> u64 {
        let resp = get(self.admin, "/stats").await;
        let map: std::collections::HashMap<String, serde_json::Value> =
            serde_json::from_slice(&resp.body).expect("stats JSON");
        map[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name} is not a count"))
    }

    fn kill9(self) {
        self.0.kill9();
    }
}

/// A GET that reports failure instead of panicking (the proxy may be killed under it).
async fn request_or_error(addr: SocketAddr, path: &str) -> bool {
    use http_body_util::{BodyExt, Empty};
    let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    let Ok((mut sender, conn)) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await
    else {
        return false;
    };
    tokio::spawn(conn);
    let Ok(req) = http::Request::get(path)
        .header("host", "test.example")
        .body(Empty::<bytes::Bytes>::new())
    else {
        return false;
    };
    match sender.send_request(req).await {
        Ok(resp) => resp.into_body().collect().await.is_ok(),
        Err(_) => false,
    }
}

/// A config file for the real binary: small memory tier, a 16 MiB disk tier written through,
/// no ban sweeps while a test runs (bans act at lookup only, so counts are exact).
fn binary_config(dir: &TempDir, origin: SocketAddr) -> std::path::PathBuf {
    let config = dir.path("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[cache]\nmemory_size = \"1MiB\"\nmax_object_size = \"256KiB\"\n\n[invalidation]\nban_sweep_interval = \"1h\"\n\n[storage.disk]\npath = \"{}\"\nsize = \"16MiB\"\nregion_size = \"1MiB\"\nadmission = \"always\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            dir.path("cache.dat").display(),
            origin.port()
        ),
    )
    .unwrap();
    config
}

/// Waits (bounded) until the `n_object_disk` of the process is exactly `n`.
async fn wait_proc_disk_objects(p: &Proc, n: u64) {
    for _ in 0..400 {
        if p.stat("n_object_disk").await == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "disk tier indexed {} objects, expected {n}",
        p.stat("n_object_disk").await
    );
}

fn by_language(s: &Seen) -> Reply {
    let lang = s
        .headers
        .get("accept-language")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_string();
    Reply::ok(&format!("{} in {lang}", s.path))
        .cc("max-age=3600")
        .header("vary", "Accept-Language")
}

async fn get_lang(addr: SocketAddr, lang: &str) -> Resp {
    get_with(addr, "/page", &[("accept-language", lang)]).await
}
