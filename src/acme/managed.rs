//! The process-wide ACME state ([`Acme`]: tokens and every managed certificate), one managed
//! certificate's settings and status, and the narrow interface ([`Host`]) the ACME tasks get
//! of the running server.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::{Notify, watch};

use super::challenge::Tokens;
use crate::config::Config;
use crate::config::acme::AcmeConfig;
use crate::tls::watch::Listeners;

/// The ACME state of a running Shellac.
#[derive(Debug, Default)]
pub struct Acme {
    /// HTTP-01 answers being asked for now.
    pub tokens: Arc<Tokens>,
    /// Every certificate being managed, in configuration order.
    pub(super) managed: Mutex<Vec<Arc<Managed>>>,
}

/// One `[[tls.acme]]`: its settings, its state, and how to reach its worker.
#[derive(Debug)]
pub struct Managed {
    /// The `[[tls]]` it serves.
    pub listener: Arc<str>,
    pub settings: AcmeConfig,
    pub(super) status: Mutex<Status>,
    /// Wakes the worker for a renewal now (`POST /acme/renew`).
    pub(super) kick: Notify,
    /// Stops the worker (its settings left the configuration).
    pub(super) stop: watch::Sender<bool>,
}

/// What `GET /acme` shows of one certificate (times in seconds since the epoch).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Status {
    /// `pending` (no certificate yet), `valid`, `ordering` (an order is running), `retrying`
    /// (the last attempt failed), `expired`.
    pub state: &'static str,
    /// SHA-256 fingerprint (hex) of the certificate in service, as `openssl x509
    /// -fingerprint -sha256` shows it (without colons).
    pub fingerprint: Option<String>,
    pub issuer: Option<String>,
    pub not_before: Option<i64>,
    pub not_after: Option<i64>,
    /// The ACME server that issued the certificate in service.
    pub issued_by: Option<String>,
    /// When the certificate in service is due for renewal.
    pub renew_at: Option<i64>,
    /// When the next attempt runs, while retrying after failures.
    pub next_attempt: Option<i64>,
    /// Failed attempts in a row (0 after a success).
    pub failures: u32,
    pub last_error: Option<String>,
    pub last_error_at: Option<i64>,
    /// When the certificate in service was obtained by this process (None: from disk).
    pub obtained_at: Option<i64>,
    /// Orders this process placed for it.
    pub orders: u64,
}

impl Managed {
    /// The state now.
    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Asks the worker to renew now (whatever the schedule or a backoff says).
    pub fn renew_now(&self) {
        self.kick.notify_one();
    }

    /// The name it is known by: its first name.
    pub fn name(&self) -> &str {
        self.settings.names.first().map_or("", String::as_str)
    }
}

impl Acme {
    /// Every managed certificate.
    pub fn managed(&self) -> Vec<Arc<Managed>> {
        self.managed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What the ACME tasks need of the running server, which `reload::Live` provides: the TLS
/// listeners and counters ([`Listeners`]), the reload generation, and the running
/// configuration with the ACME state that outlives it.
pub trait Host: Listeners {
    /// Counts configurations put in service: a change may bring or drop `[[tls.acme]]`s.
    fn generation(&self) -> u64;
    /// The running configuration and the process-wide ACME state.
    fn running(&self) -> (Arc<Config>, Arc<Acme>);
}
