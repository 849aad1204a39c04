//! `shellac demo`: a built-in origin and a cache in front of it, a miss then a hit shown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use shellac::config::{CliOverrides, Config};
use shellac::{demo, server};

use super::serve::{runtime, wait_for_signal};

/// Runs the demo until Ctrl-C.
pub(super) fn run(listen: SocketAddr, admin: SocketAddr) -> anyhow::Result<()> {
    let rt = runtime(shellac::config::ServerConfig::default().worker_threads())?;
    rt.block_on(async move {
        let origin = demo::start_origin(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let mut config = Config::embedded_default();
        config
            .apply(&CliOverrides {
                listen: vec![listen],
                backend: Some((origin.ip().to_string(), origin.port())),
                admin: Some(admin),
                cache_size: None,
                vcl: None,
            })
            .map_err(|e| anyhow::anyhow!("{}", e[0]))?;
        let running = server::start(Arc::new(config)).await.context(
            "is another Shellac (or Varnish) running? pick free ports with --listen and --admin",
        )?;
        let proxy = running.listen[0];
        let admin = running.admin.expect("admin configured");
        say!("Shellac demo is running.");
        say!("  origin (built-in) http://{origin}/   answers in {} ms, Cache-Control: public, max-age=60", demo::ORIGIN_DELAY.as_millis());
        say!("  shellac (cache)   http://{proxy}/");
        say!("  admin             http://{admin}/stats");
        say!();
        say!("Try it: the first request is a miss, the second a hit (note Cache-Status and Age):");
        say!("  curl -si http://{proxy}/hello | grep -iE '^(HTTP|age|cache-status)'");
        say!("  curl -si http://{proxy}/hello | grep -iE '^(HTTP|age|cache-status)'");
        say!("  curl -si http://{proxy}/private | grep -i cache-status   # never stored");
        say!("  curl -s  http://{admin}/stats | grep -E 'cache_(hit|miss)\"'");
        say!();
        say!("Self-check, two requests for /:");
        for _ in 0..2 {
            match demo::probe(proxy, "/").await {
                Ok((status, cache_status, age, took)) => say!(
                    "  {status:<16} Cache-Status: {cache_status:<34} Age: {age:<3} {:>4} ms",
                    took.as_millis()
                ),
                Err(e) => say!("  request failed: {e}"),
            }
        }
        say!();
        say!("Press Ctrl-C to stop.");
        wait_for_signal().await;
        running.shutdown(Duration::from_secs(2)).await;
        Ok(())
    })
}
