//! `RESTART_PAIRS=k`: only the warm-restart question, paired. One fill B (memory evicting,
//! every object written to disk), then `k` rounds of restarts after `kill -9` on that same
//! data file, alternating the binaries (`SHELLAC`, and `SHELLAC_ALT` if set), each with the
//! page cache dropped before it when `DROP_CACHES=1`. Each restart replays the first
//! `RESTART_REPLAY` (default 20,000) keys of the shuffled order (the ≥ 95% window needs only
//! the first thousands), then fetches `RESTART_WRITES` (default 800, about half a 16 MiB
//! region) keys never requested before, waits until they are written and is killed with
//! `kill -9`: every restart finds a region left open, as after a crash in the middle of work.
//! Prints a row per restart and, per binary, the medians of the time to listen, the server's
//! own recovery time and the ≥ 95% window.

use std::path::PathBuf;
use std::sync::Arc;

use super::{
    Ctx, Proc, maybe_drop_caches, run, stats, wait_flushed, warm_after, write_shellac_config,
};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// (listening after spawn, recovery, ≥ 95% window after spawn), in ms.
type Restart = (f64, f64, f64);

pub async fn restart_pairs(ctx: &Ctx, bins: &[PathBuf], k: usize) {
    let data_mib = ctx.body_bytes / (1 << 20);
    let disk_big = format!("{}MiB", (data_mib * 2).max(256).next_multiple_of(16));
    let dir = &ctx.dir;
    let replay = env_usize("RESTART_REPLAY", 20_000).min(ctx.shuffled.len());
    let writes = env_usize("RESTART_WRITES", 800);
    let subset = Arc::new(ctx.shuffled[..replay].to_vec());
    let _ = std::fs::remove_file(dir.join("cache.dat"));
    let cfg = write_shellac_config(dir, ctx.origin, "32MiB", Some((&disk_big, "16MiB")));
    let mut p = Proc::shellac(&bins[0], &cfg, ctx.pin);
    let fill = run(p.proxy, ctx.paths.clone()).await;
    wait_flushed(p.admin.expect("admin")).await;
    println!(
        "fill B: {} req, {} errors, {:.0} req/s",
        fill.samples.len(),
        fill.errors,
        fill.samples.len() as f64 / fill.took.as_secs_f64()
    );
    p.crash();
    let mut results: Vec<Vec<Restart>> = vec![Vec::new(); bins.len()];
    let mut next_new = ctx.paths.len();
    for round in 1..=k {
        for (i, bin) in bins.iter().enumerate() {
            let dropped = maybe_drop_caches();
            let mut p = Proc::shellac(bin, &cfg, ctx.pin);
            let r = run(p.proxy, subset.clone()).await;
            let admin = p.admin.expect("admin");
            let s = stats(admin).await;
            let hits = r.samples.iter().filter(|x| x.2).count();
            let ready = p.ready_after.as_secs_f64() * 1000.0;
            let warm = warm_after(&r.samples, p.ready_after)
                .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
            let recovery = s["disk_recovery_ms"] as f64;
            println!(
                "| round {round} | {} | listening {ready:.0} ms | recovery {recovery:.0} ms ({} objects{dropped}) | ≥95% (1000-window) at {warm:.0} ms after spawn | {hits} hits of {} ({} errors) | load {:.2} |",
                bin.display(),
                s["disk_recovered_objects"],
                r.samples.len(),
                r.errors,
                super::load1(),
            );
            results[i].push((ready, recovery, warm));
            // New objects, so the next start finds a region left open by `kill -9`.
            let new: Vec<String> = (next_new..next_new + writes)
                .map(|n| format!("/obj/{n}"))
                .collect();
            next_new += writes;
            run(p.proxy, Arc::new(new)).await;
            wait_flushed(admin).await;
            p.crash();
        }
    }
    let _ = std::fs::remove_file(dir.join("cache.dat"));
    for (bin, r) in bins.iter().zip(results) {
        println!(
            "| {} | {k} restarts after kill -9 | median listening {:.0} ms | median recovery {:.0} ms | median ≥95% at {:.0} ms |",
            bin.display(),
            median(r.iter().map(|x| x.0).collect()),
            median(r.iter().map(|x| x.1).collect()),
            median(r.iter().map(|x| x.2).collect()),
        );
    }
}
