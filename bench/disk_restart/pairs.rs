//! `RESTART_PAIRS=k`: only the warm-restart question, paired. One fill B (memory evicting,
//! every object written to disk), then `k` rounds of restarts after `kill -9` on that same
//! data file, alternating the binaries (`SHELLAC`, and `SHELLAC_ALT` if set), each with the
//! page cache dropped before it when `DROP_CACHES=1`. Each restart replays the first
//! `RESTART_REPLAY` (default 20,000) keys of the shuffled order (the ≥ 95% window needs only
//! the first thousands), then fetches `RESTART_WRITES` (default 800, about half a 16 MiB
//! region) keys never requested before, waits until they are written and is killed with
//! `kill -9`: every restart finds a region left open, as after a crash in the middle of work.
//! Prints a row per restart (with where the first 1000 responses' time went: the first
//! response after listening, their latencies) and, per binary, the medians of the time to
//! listen, the server's own recovery time and the ≥ 95% window.
//!
//! `RESTART_DATA=dir` keeps the data file (and the configuration) in `dir` instead of the temp
//! dir: the fill is skipped when `dir/cache.dat` exists and the file is left there at the end,
//! so repeated runs (a profile, one more pair) start from the same data set.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{
    Ctx, Proc, Sample, maybe_drop_caches, run, stats, wait_flushed, warm_after,
    write_shellac_config,
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

/// CPU time (user + system, all threads) process `pid` has used so far, in ms: from
/// `/proc/<pid>/stat`, steadier than wall time on a shared machine.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // "pid (comm) state ..." — utime and stime are fields 14 and 15; comm may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    match (f.get(11), f.get(12)) {
        (Some(u), Some(s)) if hz > 0.0 => (u + s) * 1000.0 / hz,
        _ => f64::NAN,
    }
}

/// Where the first 1000 responses' time went: the first response after the replay started,
/// the last of the 1000, and their latencies (p50 / p90 / max), in ms.
fn first_thousand(samples: &[Sample]) -> String {
    let first = &samples[..samples.len().min(1000)];
    let (Some(a), Some(z)) = (first.first(), first.last()) else {
        return "no responses".into();
    };
    let mut lat: Vec<Duration> = first.iter().map(|s| s.1).collect();
    lat.sort();
    let at = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "first response {:.1} ms, {}th {:.1} ms after listening; latency p50 {:.2} / p90 {:.2} / max {:.2} ms",
        ms(a.0),
        first.len(),
        ms(z.0),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(1.0)),
    )
}

pub async fn restart_pairs(ctx: &Ctx, bins: &[PathBuf], k: usize) {
    let data_mib = ctx.body_bytes / (1 << 20);
    let disk_big = format!("{}MiB", (data_mib * 2).max(256).next_multiple_of(16));
    let kept = std::env::var("RESTART_DATA").ok().map(PathBuf::from);
    let dir = kept.as_ref().unwrap_or(&ctx.dir);
    std::fs::create_dir_all(dir).expect("RESTART_DATA dir");
    let reuse = kept.is_some() && dir.join("cache.dat").exists();
    let replay = env_usize("RESTART_REPLAY", 20_000).min(ctx.shuffled.len());
    let writes = env_usize("RESTART_WRITES", 800);
    let subset = Arc::new(ctx.shuffled[..replay].to_vec());
    if !reuse {
        let _ = std::fs::remove_file(dir.join("cache.dat"));
    }
    let cfg = write_shellac_config(dir, ctx.origin, "32MiB", Some((&disk_big, "16MiB")));
    if reuse {
        println!("fill B: skipped, {} kept", dir.join("cache.dat").display());
    } else {
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
    }
    let mut results: Vec<Vec<Restart>> = vec![Vec::new(); bins.len()];
    // Keys no earlier run (with a kept data file) wrote either.
    let epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as usize);
    let mut next_new = ctx.paths.len() + (epoch % 1_000_000) * 100_000;
    for round in 1..=k {
        for (i, bin) in bins.iter().enumerate() {
            let dropped = maybe_drop_caches();
            let mut p = Proc::shellac(bin, &cfg, ctx.pin);
            let cpu_ready = cpu_ms(p.pid());
            let r = run(p.proxy, subset.clone()).await;
            let cpu_replay = cpu_ms(p.pid()) - cpu_ready;
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
            println!(
                "|   | {} | CPU {cpu_ready:.0} ms to listening, {:.1} µs per replayed request |",
                first_thousand(&r.samples),
                cpu_replay * 1000.0 / r.samples.len().max(1) as f64,
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
    if kept.is_none() {
        let _ = std::fs::remove_file(dir.join("cache.dat"));
    }
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
