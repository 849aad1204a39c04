//! The session timeouts VCL set for one client connection ([`SessionTimeouts`]:
//! `sess.timeout_idle`, `sess.timeout_linger`, `sess.send_timeout`, `sess.idle_send_timeout`),
//! kept between its requests by the HTTP/1.1 session (and through the parking lot while it
//! is released) and the HTTP/2 connection: each in milliseconds plus one, 0 for the
//! configured one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::proxy::SessionTimeouts;
use crate::vcl::run::SessTimeout;

#[derive(Debug, Default)]
pub(crate) struct SessClocks([AtomicU64; 4]);

impl SessClocks {
    /// What the next request carries for VCL to read: the timeouts set, if any.
    pub(crate) fn current(&self) -> Option<SessionTimeouts> {
        let mut t = SessionTimeouts::default();
        for (i, a) in self.0.iter().enumerate() {
            match a.load(Ordering::Relaxed) {
                0 => {}
                v => t.set(i, Some(Duration::from_millis(v - 1))),
            }
        }
        t.any().then_some(t)
    }

    /// The timeouts a response's VCL left for the session, from now on; whether any changed.
    pub(crate) fn keep(&self, t: &SessionTimeouts) -> bool {
        let mut changed = false;
        for (i, a) in self.0.iter().enumerate() {
            let v = t.get(i).map_or(0, |d| {
                u64::try_from(d.as_millis()).unwrap_or(u64::MAX - 1) + 1
            });
            changed |= a.swap(v, Ordering::Relaxed) != v;
        }
        changed
    }

    /// Timeout `which` in milliseconds, or `configured` when VCL did not set it.
    pub(crate) fn ms(&self, which: SessTimeout, configured: u64) -> u64 {
        match self.0[which as usize].load(Ordering::Relaxed) {
            0 => configured,
            v => v - 1,
        }
    }

    /// Whether VCL set any timeout for the session.
    pub(crate) fn any(&self) -> bool {
        self.0.iter().any(|a| a.load(Ordering::Relaxed) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_read_back_and_zero_is_a_value() {
        let c = SessClocks::default();
        assert_eq!(c.current(), None);
        assert_eq!(c.ms(SessTimeout::Send, 7), 7);
        let t = SessionTimeouts {
            linger: Some(Duration::ZERO),
            send: Some(Duration::from_millis(1500)),
            ..SessionTimeouts::default()
        };
        assert!(c.keep(&t));
        assert!(!c.keep(&t));
        assert_eq!(c.current(), Some(t));
        assert_eq!(c.ms(SessTimeout::Linger, 1000), 0);
        assert_eq!(c.ms(SessTimeout::Send, 0), 1500);
        assert_eq!(c.ms(SessTimeout::Idle, 60_000), 60_000);
        assert!(c.any());
        assert!(c.keep(&SessionTimeouts::default()));
        assert!(!c.any());
    }
}
