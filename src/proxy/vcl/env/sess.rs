//! VCL's per-session timeouts — `sess.timeout_idle`, `sess.timeout_linger`,
//! `sess.send_timeout`, `sess.idle_send_timeout` — read and set: as this request set them,
//! else as an earlier response set them for the session (the request's
//! [`SessionTimeouts`]), else the configured ones (`server.idle_timeout`, `idle_release`,
//! `send_total_timeout`, `send_timeout`).

use super::Scope;
use crate::proxy::SessionTimeouts;
use crate::vcl::run::SessTimeout;
use crate::vcl::vars::Slot;

/// Which session timeout a `sess.*` slot is.
fn which(slot: Slot) -> SessTimeout {
    match slot {
        Slot::SessTimeoutLinger => SessTimeout::Linger,
        Slot::SessSendTimeout => SessTimeout::Send,
        Slot::SessIdleSendTimeout => SessTimeout::IdleSend,
        _ => SessTimeout::Idle,
    }
}

impl Scope<'_> {
    /// The session timeout `slot` names, in seconds.
    pub(super) fn sess_timeout(&self, slot: Slot) -> f64 {
        let i = which(slot) as usize;
        let configured = self.rt.sess_defaults[i];
        match self.state.sess[i] {
            Some(Some(secs)) => secs,
            Some(None) => configured,
            None => self
                .req
                .as_ref()
                .and_then(|r| r.extensions.get::<SessionTimeouts>())
                .and_then(|s| s.get(i))
                .map_or(configured, crate::proxy::vcl::never_as_varnish),
        }
    }

    /// Sets (`Some`) or unsets (`None`: back to the configured one) the session timeout
    /// `slot` names; a negative one is 0 (for idle and idle send: at once; for linger: the
    /// session keeps its state; for send: no limit).
    pub(super) fn set_sess(&mut self, slot: Slot, secs: Option<f64>) {
        self.state.sess[which(slot) as usize] = Some(secs.map(|s| s.max(0.0)));
    }
}
