//! One `[[tls.acme]]`'s worker: the certificate kept on disk is put in service at once; then,
//! in a loop, wait until something is due — no certificate yet, one that no longer fits the
//! settings (names, ACME server), its renewal time, the end of a backoff, or `POST
//! /acme/renew` — and run an attempt: account, order, store, install. A failure leaves the
//! certificate in service as it is, is counted by kind, and the next attempt waits
//! `retry_min`, doubling to `retry_max`; a success resets that.

use std::sync::Arc;
use std::time::Duration;

use instant_acme::{Account, ExternalAccountKey};
use tokio::sync::watch;
use tokio::time::Instant;

use super::failure::Failure;
use super::managed::{Host, Managed};
use super::order::{self, Responders};
use super::{account, files, http, schedule};
use crate::tls::certs::{Loaded, unix_now};
use crate::tls::watch::Listeners;

/// Longest single sleep: the schedule is looked at again at least this often (the wall clock
/// may have jumped, e.g. after a suspend).
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// Longest time one attempt may take, account to download.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(300);

/// The certificate in service, as far as scheduling cares.
#[derive(Clone, Debug)]
pub(super) struct Current {
    names: Vec<String>,
    not_before: i64,
    not_after: i64,
    /// The ACME server that issued it.
    directory: String,
}

impl Current {
    fn of(loaded: &Loaded, directory: String) -> Current {
        Current {
            names: loaded.facts.dns_names.clone(),
            not_before: loaded.facts.not_before,
            not_after: loaded.facts.not_after,
            directory,
        }
    }
}

/// Installs the certificate kept in the state directory, if there is one (counted in
/// `acme_loaded`); what the worker starts from.
pub(super) fn install_kept(m: &Managed, live: &impl Host) -> Option<Current> {
    let s = &m.settings;
    match files::load(&s.state_dir, m.name()) {
        Ok(None) => None,
        Ok(Some(stored)) => {
            let directory = stored
                .meta
                .map_or_else(|| s.directory.clone(), |meta| meta.directory);
            let current = Current::of(&stored.loaded, directory.clone());
            put_in_service(m, live, stored.loaded, &directory, None);
            live.counters().acme_loaded.inc();
            tracing::info!(listener = %m.listener, names = %s.names.join(", "), "ACME certificate loaded from {}", s.state_dir.display());
            Some(current)
        }
        Err(e) => {
            tracing::warn!(listener = %m.listener, "cannot use the kept ACME certificate, a new one will be ordered: {e}");
            m.update(|st| {
                st.last_error = Some(e);
                st.last_error_at = Some(unix_now());
            });
            None
        }
    }
}

/// Installs `loaded` in the listener and says so in the status (`obtained`: when, if this
/// process obtained it).
fn put_in_service(
    m: &Managed,
    live: &impl Listeners,
    loaded: Loaded,
    directory: &str,
    obtained: Option<i64>,
) {
    let facts = loaded.facts.clone();
    let fingerprint = ring::digest::digest(&ring::digest::SHA256, loaded.key.cert[0].as_ref());
    if let Some(f) = live.tls().get(&m.listener) {
        f.store.install(loaded, "acme");
    }
    m.update(|st| {
        st.fingerprint = Some(hex(fingerprint.as_ref()));
        st.issuer = Some(facts.issuer.clone());
        st.not_before = Some(facts.not_before);
        st.not_after = Some(facts.not_after);
        st.issued_by = Some(directory.to_string());
        st.obtained_at = obtained;
    });
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `current` is not what the settings ask for: it misses a name, or another ACME
/// server issued it.
fn unfit(current: &Current, m: &Managed) -> bool {
    current.directory != m.settings.directory
        || !m.settings.names.iter().all(|n| current.names.contains(n))
}

/// Runs until shutdown or until its settings leave the configuration (`stopped`).
pub(super) async fn run(
    m: Arc<Managed>,
    live: Arc<impl Host>,
    mut current: Option<Current>,
    mut shutdown: watch::Receiver<bool>,
    mut stopped: watch::Receiver<bool>,
) {
    let s = m.settings.clone();
    let mut failures: u32 = 0;
    let mut retry_at: Option<(Instant, i64)> = None;
    let mut account: Option<Account> = None;
    loop {
        let now = unix_now();
        let renew_at = current
            .as_ref()
            .map(|c| schedule::renew_at(c.not_before, c.not_after, s.renew_before.map(|d| d.0)));
        let cert_due = match (&current, renew_at) {
            (Some(c), Some(at)) if !unfit(c, &m) => at,
            _ => now,
        };
        let cert_wait = Duration::from_secs(u64::try_from(cert_due - now).unwrap_or(0));
        let retry_wait = retry_at.map_or(Duration::ZERO, |(t, _)| {
            t.saturating_duration_since(Instant::now())
        });
        let wait = cert_wait.max(retry_wait);
        m.update(|st| {
            st.renew_at = renew_at;
            st.next_attempt = retry_at.map(|(_, unix)| unix);
            st.state = match &current {
                None if failures > 0 => "retrying",
                None => "pending",
                Some(c) if now > c.not_after => "expired",
                Some(_) if failures > 0 => "retrying",
                Some(_) => "valid",
            };
        });
        let forced = tokio::select! {
            _ = tokio::time::sleep(wait.min(MAX_SLEEP)) => false,
            _ = m.kick.notified() => true,
            _ = shutdown.changed() => return,
            _ = stopped.changed() => return,
        };
        if !forced && wait > MAX_SLEEP {
            continue; // Not due yet: look at the clock again.
        }
        let had = current.is_some();
        m.update(|st| {
            st.state = "ordering";
            st.orders += 1;
        });
        let attempt = tokio::time::timeout(ATTEMPT_TIMEOUT, attempt(&m, &*live, &mut account));
        let result = tokio::select! {
            r = attempt => r.unwrap_or_else(|_| Err(Failure::Timeout(format!(
                "the attempt did not finish within {}s", ATTEMPT_TIMEOUT.as_secs()
            )))),
            _ = shutdown.changed() => return,
            _ = stopped.changed() => return,
        };
        let counters = live.counters();
        match result {
            Ok(new) => {
                counters.acme_issued.inc();
                if had {
                    counters.acme_renewed.inc();
                }
                tracing::info!(listener = %m.listener, names = %s.names.join(", "), not_after = %crate::tls::certs::format_time(new.not_after), "ACME certificate obtained and in service");
                current = Some(new);
                failures = 0;
                retry_at = None;
            }
            Err(f) => {
                f.count(&counters);
                if matches!(f, Failure::Account(_)) {
                    account = None;
                }
                failures = failures.saturating_add(1);
                let delay = schedule::retry_after(failures, s.retry_min.0, s.retry_max.0);
                let at_unix = unix_now() + i64::try_from(delay.as_secs()).unwrap_or(0);
                retry_at = Some((Instant::now() + delay, at_unix));
                let keeps = if current.is_some() {
                    "the current certificate stays in service"
                } else {
                    "no certificate for these names yet"
                };
                tracing::warn!(listener = %m.listener, names = %s.names.join(", "), kind = f.kind(), failures, "ACME attempt failed ({keeps}); next attempt in {}: {f}", crate::config::units::format_duration(delay));
                m.update(|st| {
                    st.failures = failures;
                    st.last_error = Some(format!("{}: {}", f.kind(), f.message()));
                    st.last_error_at = Some(unix_now());
                });
            }
        }
    }
}

/// One attempt: the account (made or loaded once), an order, the certificate checked,
/// stored and put in service.
async fn attempt(
    m: &Managed,
    live: &impl Host,
    account_slot: &mut Option<Account>,
) -> Result<Current, Failure> {
    let s = &m.settings;
    live.counters().acme_order.inc();
    if account_slot.is_none() {
        let client = http::Client::new(s.ca_root.as_deref()).map_err(Failure::Network)?;
        let eab = match (&s.eab_kid, &s.eab_hmac_key) {
            (Some(kid), Some(key)) => Some(ExternalAccountKey::new(
                kid.clone(),
                &crate::config::acme::eab_key_bytes(key)
                    .map_err(|e| Failure::Account(format!("eab_hmac_key {e}")))?,
            )),
            _ => None,
        };
        let acct = account::open(
            &s.state_dir,
            &s.directory,
            &s.contact,
            eab.as_ref(),
            Arc::new(client),
        )
        .await?;
        *account_slot = Some(acct);
    }
    let Some(acct) = account_slot.as_ref() else {
        return Err(Failure::Account("no account".into()));
    };
    let responders = Responders {
        tokens: live.running().1.tokens.clone(),
        store: live.tls().get(&m.listener).map(|f| f.store.clone()),
    };
    let issued = match order::obtain(acct, &s.names, s.challenge, s.key_type, &responders).await {
        Err(Failure::Account(e)) => {
            // The server no longer knows the account: register the key again next time.
            let json = files::account_dir(&s.state_dir, &s.directory).join("account.json");
            let _ = std::fs::remove_file(json);
            return Err(Failure::Account(e));
        }
        other => other?,
    };
    let loaded = files::from_pem(issued.chain_pem.as_bytes(), issued.key_pem.as_bytes())
        .map_err(|e| Failure::Certificate(format!("the issued certificate: {e}")))?;
    if let Some(missing) = s.names.iter().find(|n| !loaded.facts.dns_names.contains(n)) {
        return Err(Failure::Certificate(format!(
            "the issued certificate does not cover {missing} (it names {})",
            loaded.facts.names_text()
        )));
    }
    let now = unix_now();
    let meta = files::Meta {
        names: s.names.clone(),
        directory: s.directory.clone(),
        issued_at: now,
    };
    let state_dir = s.state_dir.clone();
    tokio::task::spawn_blocking(move || {
        files::store(&state_dir, &issued.chain_pem, &issued.key_pem, &meta)
    })
    .await
    .map_err(|e| Failure::Storage(e.to_string()))?
    .map_err(Failure::Storage)?;
    let current = Current::of(&loaded, s.directory.clone());
    put_in_service(m, live, loaded, &s.directory, Some(now));
    Ok(current)
}
