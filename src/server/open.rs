//! A connection's place in the open-connection count ([`OpenConn`], held by whichever task
//! serves it), and the millisecond values the connections' clocks compare ([`ms`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::proxy::Process;

/// Decrements the open-connection gauge however the connection task ends (incremented by the
/// accept loop, which counts it against `max_connections`); a tunnel keeps it alive.
pub(crate) struct OpenConn(pub(super) Arc<Process>);

impl Drop for OpenConn {
    fn drop(&mut self) {
        self.0.open_conns.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A duration in whole milliseconds (saturating), as `clock::now_ms` counts.
pub(super) fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}
