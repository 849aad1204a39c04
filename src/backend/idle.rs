//! The HTTP/1.1 kind's keep-alive pool: idle connections to one backend, LIFO (the warmest
//! first), at most `max_idle`, none older than `idle_timeout`. A response body read to the end
//! gives its connection back here (`source::Release::Pool`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::conn::Http1Conn;
use super::endpoint::Endpoint;

struct Idle {
    conn: Http1Conn,
    since: Instant,
}

/// Idle HTTP/1.1 connections to one backend.
#[derive(Default)]
pub(crate) struct KeepAlive {
    idle: Mutex<Vec<Idle>>,
}

impl KeepAlive {
    /// Takes a usable idle connection (LIFO: the warmest one), dropping stale ones.
    pub(super) async fn checkout(&self, endpoint: &Endpoint) -> Option<Http1Conn> {
        loop {
            let idle = self.idle.lock().ok()?.pop()?;
            if idle.since.elapsed() > endpoint.config.idle_timeout.0
                || idle.conn.sender.is_closed()
                || idle.conn.retired()
            {
                continue;
            }
            let mut conn = idle.conn;
            // The connection task may still be finishing the previous exchange.
            match tokio::time::timeout(Duration::from_millis(100), conn.sender.ready()).await {
                Ok(Ok(())) => return Some(conn),
                _ => continue,
            }
        }
    }

    /// Returns a connection whose last response was read to the end.
    pub(crate) fn checkin(&self, endpoint: &Endpoint, mut conn: Http1Conn) {
        if conn.sender.is_closed() || conn.retired() {
            conn.log_close(&endpoint.config.name, false);
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            let now = Instant::now();
            let max_idle = endpoint.config.idle_timeout.0;
            idle.retain(|i| now.duration_since(i.since) < max_idle && !i.conn.sender.is_closed());
            if idle.len() < endpoint.config.max_idle {
                conn.log_close(&endpoint.config.name, true);
                idle.push(Idle { conn, since: now });
                endpoint.counters.backend_recycle.inc();
                endpoint.stats.recycle.inc();
            }
        }
    }

    /// Idle connections right now.
    pub(super) fn len(&self) -> usize {
        self.idle.lock().map(|i| i.len()).unwrap_or(0)
    }
}
