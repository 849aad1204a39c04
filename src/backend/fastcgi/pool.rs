//! Kept FastCGI connections: a LIFO pool of at most `max_idle`, each closed once unused for
//! `idle_timeout` by a task that runs while any are kept.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::backend::connector::Transport;

/// Kept connections.
pub(crate) struct Pool {
    idle: Mutex<Idle>,
    max_idle: usize,
    idle_timeout: Duration,
}

/// The kept connections, oldest first, and whether a task is closing them as they expire.
#[derive(Default)]
struct Idle {
    conns: Vec<(Transport, Instant)>,
    reaping: bool,
}

impl Pool {
    /// An empty pool keeping at most `max_idle` connections, each for `idle_timeout` unused.
    pub(super) fn new(max_idle: usize, idle_timeout: Duration) -> Pool {
        Pool {
            idle: Mutex::new(Idle::default()),
            max_idle,
            idle_timeout,
        }
    }

    /// Whether connections are kept at all (`max_idle` > 0).
    pub(super) fn keeps(&self) -> bool {
        self.max_idle > 0
    }

    /// Connections kept now.
    pub(super) fn kept(&self) -> usize {
        self.idle.lock().map(|i| i.conns.len()).unwrap_or(0)
    }

    /// A connection whose request ended cleanly, kept for the next one. A kept connection
    /// holds a PHP-FPM child, so it is closed once `idle_timeout` passes unused — by a task
    /// that runs while any are kept, not at the next request, which may never come.
    pub(crate) fn checkin(self: &Arc<Self>, conn: Transport) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        let now = Instant::now();
        idle.conns
            .retain(|(_, since)| now.duration_since(*since) < self.idle_timeout);
        if idle.conns.len() >= self.max_idle {
            return;
        }
        idle.conns.push((conn, now));
        if !idle.reaping
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            idle.reaping = true;
            runtime.spawn(Pool::reap(Arc::downgrade(self)));
        }
    }

    /// Closes kept connections as they pass `idle_timeout`; ends when none is kept (or the
    /// backend is gone).
    async fn reap(pool: std::sync::Weak<Pool>) {
        loop {
            let wake = {
                let Some(pool) = pool.upgrade() else { return };
                let Ok(mut idle) = pool.idle.lock() else {
                    return;
                };
                let now = Instant::now();
                let timeout = pool.idle_timeout;
                idle.conns
                    .retain(|(_, since)| now.duration_since(*since) < timeout);
                match idle.conns.iter().map(|(_, since)| *since).min() {
                    Some(oldest) => oldest + timeout,
                    None => {
                        idle.reaping = false;
                        return;
                    }
                }
            };
            tokio::time::sleep_until(wake.into()).await;
        }
    }

    /// The most recently kept connection still within `idle_timeout`.
    pub(super) fn checkout(&self) -> Option<Transport> {
        let mut idle = self.idle.lock().ok()?;
        while let Some((conn, since)) = idle.conns.pop() {
            if since.elapsed() < self.idle_timeout {
                return Some(conn);
            }
        }
        None
    }
}
