//! Running as a system service: the systemd notification protocol ([`notify`]), the
//! periodic `STATUS=` line and watchdog ([`run`]). A bottom layer: it imports nothing of the
//! crate; what it reports is handed to it.

pub mod handover;
pub mod listeners;
pub mod notify;
pub mod warm;

use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The counters and gauges now, by name (`Proxy::stats` of the configuration in force).
pub type Stats = Vec<(&'static str, u64)>;

/// How often the `STATUS=` line is refreshed.
const STATUS_EVERY: Duration = Duration::from_secs(5);

/// The one-line summary systemd shows (`systemctl status shellac`): requests per second and
/// hit ratio since the previous line, objects cached (on disk among them).
pub fn status_line(stats: &Stats, previous: &mut Option<(Instant, u64, u64, u64)>) -> String {
    let get = |name: &str| {
        stats
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    };
    let (req, hit, miss) = (get("client_req"), get("cache_hit"), get("cache_miss"));
    let (objects, on_disk) = (get("n_object"), get("n_object_disk"));
    let now = Instant::now();
    let (rate, ratio) = match *previous {
        Some((at, r0, h0, m0)) => {
            let secs = now.duration_since(at).as_secs_f64().max(0.001);
            let (h, m) = (hit.saturating_sub(h0), miss.saturating_sub(m0));
            (
                req.saturating_sub(r0) as f64 / secs,
                (h + m > 0).then(|| h as f64 * 100.0 / (h + m) as f64),
            )
        }
        None => (
            0.0,
            (hit + miss > 0).then(|| hit as f64 * 100.0 / (hit + miss) as f64),
        ),
    };
    *previous = Some((now, req, hit, miss));
    let ratio = ratio.map_or_else(|| "-".to_string(), |r| format!("{r:.1}%"));
    let disk = if on_disk > 0 {
        format!(" ({on_disk} on disk)")
    } else {
        String::new()
    };
    format!("{rate:.1} req/s, hit ratio {ratio}, {objects} objects{disk}")
}

/// Sends `STATUS=` every few seconds and `WATCHDOG=1` at half of `$WATCHDOG_USEC` (when set)
/// until shutdown. Does nothing without `$NOTIFY_SOCKET`. The watchdog is fed from the
/// runtime itself, so a runtime that stops making progress stops feeding it.
pub async fn run(stats: impl Fn() -> Stats, mut shutdown: watch::Receiver<bool>) {
    if !notify::enabled() {
        return;
    }
    let watchdog = notify::watchdog_interval();
    let tick = watchdog.map_or(STATUS_EVERY, |w| w.min(STATUS_EVERY));
    let mut previous = None;
    let _ = status_line(&stats(), &mut previous);
    let mut last_status = Instant::now();
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.changed() => return,
        }
        if watchdog.is_some() {
            notify::watchdog();
        }
        if last_status.elapsed() >= STATUS_EVERY {
            notify::status(&status_line(&stats(), &mut previous));
            last_status = Instant::now();
        }
    }
}
