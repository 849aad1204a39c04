//! Recv's first step (`fsm.rs`), only when the configuration has `[[site]]`s or rewrites:
//! the request's site from its listener and host (`site.rs`), then its rewrites (or
//! `[routing] rewrite`, `rules::rewrite`) on the target before the cache key is made.

use http::StatusCode;

use super::Listener;
use super::deliver;
use super::site::{Choice, strip_port};
use super::txn::{Step, Txn};
use crate::rules::rewrite::{self, Outcome, Vars};

impl Txn {
    /// Chooses the request's site and runs its rewrites (else the global ones), once per
    /// request: `Some(step)` when that answers it — the unknown-site status, a rewrite's
    /// redirect, a rewrite cycle's 500. A request whose host is invalid is left to Recv.
    pub(super) fn site_and_rewrite(&mut self) -> Option<Step> {
        // The pass after a body read ahead for vcl_recv: already done.
        if self.key.is_some() {
            return None;
        }
        let proxy = self.proxy.clone();
        let host = Txn::authority(&self.req).ok()?;
        // A restart (VCL) chooses the site again from the host it left (vcl_recv or
        // vcl_deliver may have changed it); the same site keeps its rewritten target, as
        // nginx runs a server's rewrites once; another site's rewrites run on it.
        let restarted = self.policy.restarted(self);
        let before = self.site.clone();
        if let Some(sites) = &proxy.sites {
            let listener = self.req.extensions.get::<Listener>().map(|l| l.0);
            match sites.choose(listener, host) {
                Choice::Global => self.site = None,
                Choice::Site(site) => {
                    if self.route.is_none() {
                        self.route = site.route.clone();
                    }
                    self.site = Some(site.clone());
                }
                Choice::Unknown => {
                    proxy.counters.client_req_unknown_site.inc();
                    let status = StatusCode::from_u16(proxy.config.server.unknown_site_status)
                        .unwrap_or(StatusCode::MISDIRECTED_REQUEST);
                    return Some(Step::Synth(status, "unknown-site"));
                }
            }
        }
        let same_site = match (&before, &self.site) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if restarted && same_site {
            return None;
        }
        let rewrites = match self.site.as_ref().and_then(|s| s.rewrites.as_ref()) {
            Some(own) => own.as_slice(),
            None => proxy.rewrites.as_slice(),
        };
        if rewrites.is_empty() {
            return None;
        }
        let https = self
            .req
            .extensions
            .get::<crate::tls::server::Session>()
            .is_some();
        let vars = Vars {
            scheme: if https { "https" } else { "http" },
            host: strip_port(host),
            request_uri: self.req.uri.path_and_query().map_or("/", |p| p.as_str()),
        };
        let outcome = rewrite::apply(rewrites, self.req.uri.path(), self.req.uri.query(), vars);
        match outcome {
            Outcome::Unchanged => None,
            Outcome::Rewritten(target) => {
                proxy.counters.rewrite.inc();
                if let Some(site) = &self.site {
                    site.stats.rewrite.inc();
                }
                let mut parts = self.req.uri.clone().into_parts();
                match target.parse() {
                    Ok(pq) => parts.path_and_query = Some(pq),
                    // A capture that put bytes a target cannot hold (a space from `%20`).
                    Err(_) => {
                        return Some(Step::Synth(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "rewrite-invalid",
                        ));
                    }
                }
                if let Ok(uri) = http::Uri::from_parts(parts) {
                    self.req.uri = uri;
                }
                None
            }
            Outcome::Redirect { status, location } => {
                proxy.counters.rewrite_redirect.inc();
                proxy.counters.synth_resp.inc();
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FOUND);
                let body = format!(
                    "{} {}\n{location}\n",
                    status.as_u16(),
                    status.canonical_reason().unwrap_or("")
                );
                Some(Step::Deliver(deliver::generated(
                    status,
                    "text/plain; charset=utf-8",
                    body,
                    Some(&location),
                )))
            }
            Outcome::Cycle => {
                proxy.counters.rewrite_cycle.inc();
                tracing::warn!(
                    target = %self.req.uri,
                    "rewrite or internal redirection cycle (more than 10 `last` restarts): answered 500"
                );
                Some(Step::Synth(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "rewrite-cycle",
                ))
            }
        }
    }
}
