//! ACME (RFC 8555): certificates that `[[tls.acme]]` listeners obtain and renew themselves.
//!
//! One *worker* task per `[[tls.acme]]` (`worker.rs`) owns its certificate: it installs the
//! one kept in the state directory (`files.rs`) at once, orders a new one when there is none,
//! when it no longer fits the settings (other names, another ACME server) or when renewal is
//! due (`schedule.rs`), and retries failures after a growing delay while the last good
//! certificate stays in service. An order (`order.rs`) runs over an account (`account.rs`)
//! and our own HTTPS client (`http.rs`), with instant-acme doing the protocol (JWS, nonces,
//! polling); its challenges are answered by the listeners (`challenge.rs`: HTTP-01 tokens on
//! every listener before rules and cache, TLS-ALPN-01 certificates in the listener's
//! `CertStore`).
//!
//! [`Acme`] is the process-wide part (in `proxy::Process`, so it outlives reloads): the HTTP-01
//! tokens and every worker's state, which the admin API (`GET /acme`, `POST /acme/renew`) and
//! `/metrics` read. [`sync`] starts and stops workers to match the configuration: at start
//! (before the listeners accept, so kept certificates answer the first handshake) and after
//! each reload ([`run`] looks once a second).

mod account;
pub mod challenge;
pub mod files;
mod http;

pub use http::reach_directory;
mod order;
pub mod schedule;
mod worker;

use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::{Notify, watch};

use crate::config::Config;
use crate::config::acme::AcmeConfig;
use crate::stats::Counters;
use crate::tls::watch::Listeners;
pub use challenge::Tokens;

/// The ACME state of a running Shellac.
#[derive(Debug, Default)]
pub struct Acme {
    /// HTTP-01 answers being asked for now.
    pub tokens: Arc<Tokens>,
    /// Every certificate being managed, in configuration order.
    managed: Mutex<Vec<Arc<Managed>>>,
}

/// One `[[tls.acme]]`: its settings, its state, and how to reach its worker.
#[derive(Debug)]
pub struct Managed {
    /// The `[[tls]]` it serves.
    pub listener: Arc<str>,
    pub settings: AcmeConfig,
    status: Mutex<Status>,
    /// Wakes the worker for a renewal now (`POST /acme/renew`).
    kick: Notify,
    /// Stops the worker (its settings left the configuration).
    stop: watch::Sender<bool>,
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

    fn update(&self, f: impl FnOnce(&mut Status)) {
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

/// Why an attempt failed; each kind is counted (`acme_fail_<kind>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The ACME server could not be reached or did not answer.
    Network(String),
    /// The account could not be created, loaded or updated.
    Account(String),
    /// The server refused a request (an RFC 7807 problem document).
    Rejected(String),
    /// A challenge failed.
    Validation(String),
    /// The order did not become ready or valid in time.
    Timeout(String),
    /// The state directory could not be written.
    Storage(String),
    /// The certificate could not be made or used.
    Certificate(String),
}

impl Failure {
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Network(_) => "network",
            Failure::Account(_) => "account",
            Failure::Rejected(_) => "rejected",
            Failure::Validation(_) => "validation",
            Failure::Timeout(_) => "timeout",
            Failure::Storage(_) => "storage",
            Failure::Certificate(_) => "certificate",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::Network(m)
            | Failure::Account(m)
            | Failure::Rejected(m)
            | Failure::Validation(m)
            | Failure::Timeout(m)
            | Failure::Storage(m)
            | Failure::Certificate(m) => m,
        }
    }

    /// Counts it (and in the total).
    pub fn count(&self, c: &Counters) {
        c.acme_fail.inc();
        match self {
            Failure::Network(_) => c.acme_fail_network.inc(),
            Failure::Account(_) => c.acme_fail_account.inc(),
            Failure::Rejected(_) => c.acme_fail_rejected.inc(),
            Failure::Validation(_) => c.acme_fail_validation.inc(),
            Failure::Timeout(_) => c.acme_fail_timeout.inc(),
            Failure::Storage(_) => c.acme_fail_storage.inc(),
            Failure::Certificate(_) => c.acme_fail_certificate.inc(),
        }
    }

    /// A problem document in a sentence: its detail and type.
    fn describe(p: &instant_acme::Problem) -> String {
        let kind = p
            .r#type
            .as_deref()
            .map(|t| t.trim_start_matches("urn:ietf:params:acme:error:"));
        let mut out = match (&p.detail, kind) {
            (Some(d), Some(k)) => format!("{d} ({k})"),
            (Some(d), None) => d.clone(),
            (None, Some(k)) => k.to_string(),
            (None, None) => "an error without details".into(),
        };
        for s in &p.subproblems {
            if let Some(d) = &s.detail {
                out.push_str(&format!("; {d}"));
            }
        }
        out
    }

    /// An instant-acme error, sorted by what it means for the operator.
    fn from_acme(e: instant_acme::Error) -> Failure {
        use instant_acme::Error as E;
        match e {
            E::Api(p) => {
                let text = Failure::describe(&p);
                let kind = p
                    .r#type
                    .as_deref()
                    .unwrap_or("")
                    .trim_start_matches("urn:ietf:params:acme:error:");
                match kind {
                    "connection" | "dns" | "incorrectResponse" | "tls" | "caa" => {
                        Failure::Validation(text)
                    }
                    "accountDoesNotExist" | "invalidContact" | "unsupportedContact" => {
                        Failure::Account(text)
                    }
                    "externalAccountRequired" => Failure::Account(format!(
                        "{text}: this CA binds ACME accounts to an account of its own; set \
                         `eab_kid` and `eab_hmac_key` to what it gave"
                    )),
                    _ => Failure::Rejected(text),
                }
            }
            E::Timeout(_) => {
                Failure::Timeout("the ACME server did not finish the order within 2 minutes".into())
            }
            E::Other(inner) => match inner.downcast::<http::NetworkError>() {
                Ok(n) => Failure::Network(n.0),
                Err(other) => Failure::Network(other.to_string()),
            },
            E::Json(e) => Failure::Rejected(format!(
                "the server's answer is not what an ACME server sends ({e}); is `directory` right?"
            )),
            E::Crypto | E::KeyRejected => Failure::Account(e.to_string()),
            e => Failure::Rejected(e.to_string()),
        }
    }

    /// A failure of the account step, whatever its kind would otherwise be.
    fn in_account(self) -> Failure {
        match self {
            Failure::Network(m) => Failure::Network(m),
            other => Failure::Account(other.message().to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
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

/// Starts a worker for every `[[tls.acme]]` of the running configuration that has none and
/// stops those whose settings are gone; a new worker installs the certificate kept in its
/// state directory before this returns.
pub fn sync(live: &Arc<impl Host>, shutdown: &watch::Receiver<bool>) {
    let (config, acme) = live.running();
    let wanted: Vec<(Arc<str>, &AcmeConfig)> = config
        .tls
        .iter()
        .flat_map(|t| {
            let name: Arc<str> = t.name.as_str().into();
            t.acme.iter().map(move |a| (name.clone(), a))
        })
        .collect();
    let mut managed = acme.managed.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = Vec::with_capacity(wanted.len());
    let mut retired = Vec::new();
    for m in managed.drain(..) {
        if wanted
            .iter()
            .any(|(l, a)| *l == m.listener && **a == m.settings)
        {
            next.push(m);
        } else {
            retired.push(m);
        }
    }
    for m in &retired {
        let _ = m.stop.send(true);
        let replaced = wanted
            .iter()
            .any(|(l, a)| *l == m.listener && a.names == m.settings.names);
        // A certificate whose settings are gone leaves the listener; one whose other
        // settings changed stays until its new worker installs it again.
        if !replaced && let Some(f) = live.tls().get(&m.listener) {
            f.store.uninstall(&m.settings.names);
        }
    }
    for (listener, settings) in wanted {
        if next
            .iter()
            .any(|m| m.listener == listener && m.settings == *settings)
        {
            continue;
        }
        let (stop, stopped) = watch::channel(false);
        let m = Arc::new(Managed {
            listener,
            settings: settings.clone(),
            status: Mutex::new(Status {
                state: "pending",
                ..Status::default()
            }),
            kick: Notify::new(),
            stop,
        });
        let kept = worker::install_kept(&m, &**live);
        tokio::spawn(worker::run(
            m.clone(),
            live.clone(),
            kept,
            shutdown.clone(),
            stopped,
        ));
        next.push(m);
    }
    // Configuration order, for the admin API.
    let order = |m: &Arc<Managed>| {
        config
            .tls
            .iter()
            .flat_map(|t| t.acme.iter().map(move |a| (t.name.as_str(), a)))
            .position(|(l, a)| *l == *m.listener && *a == m.settings)
    };
    next.sort_by_key(order);
    *managed = next;
}

/// Keeps the workers in step with the configuration after reloads, until shutdown.
pub async fn run(live: Arc<impl Host>, mut shutdown: watch::Receiver<bool>) {
    let mut generation = live.generation();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            _ = shutdown.changed() => return,
        }
        let now = live.generation();
        if now != generation {
            generation = now;
            sync(&live, &shutdown);
        }
    }
}
