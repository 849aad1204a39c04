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
mod failure;
mod managed;
mod order;
pub mod schedule;
mod worker;

use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, watch};

use crate::config::acme::AcmeConfig;
pub use challenge::Tokens;
pub use failure::Failure;
pub use managed::{Acme, Host, Managed, Status};

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
