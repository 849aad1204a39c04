//! `PURGE` under `[[rule]]`s: the URL (every variant), soft or by tag, from allowed networks
//! only, sent on to the fleet when there is one; the answer says what was removed.

use http::StatusCode;

use super::deliver;
use super::txn::{Step, Txn};
use crate::cache::shared::feed::{self, Invalidation};

impl Txn {
    /// `PURGE`: from allowed networks only. With `Surrogate-Key` (or `xkey-purge`) it purges
    /// those tags; otherwise the URL, every variant — softly (stale, kept for grace) with
    /// `Soft-Purge: 1`. 200 with what was removed, 404 if nothing was cached.
    pub(super) fn purge(&mut self) -> Step {
        let counters = &self.proxy.counters;
        if !self.proxy.config.invalidation.may_purge(self.client.ip()) {
            counters.purge_denied.inc();
            return Step::Synth(StatusCode::METHOD_NOT_ALLOWED, "purge-not-allowed");
        }
        counters.purge_req.inc();
        let cache = &self.proxy.cache;
        let tags: Vec<String> = ["surrogate-key", "xkey-purge"]
            .iter()
            .flat_map(|f| self.req.headers.get_all(*f).iter())
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split_ascii_whitespace())
            .map(str::to_string)
            .collect();
        let soft = self.req.headers.get("soft-purge").is_some_and(|v| v == "1");
        let Some(key) = &self.key else {
            return Step::Synth(StatusCode::BAD_REQUEST, "no-key");
        };
        let (n, what, inv) = if !tags.is_empty() {
            let what = format!("tags {}", tags.join(" "));
            (cache.purge_tags(&tags), what, Invalidation::Tags(tags))
        } else if soft {
            let what = format!("{key} (soft)");
            (cache.soft_purge(key), what, Invalidation::Soft(key.clone()))
        } else {
            (
                cache.purge(key),
                key.to_string(),
                Invalidation::Purge(key.clone()),
            )
        };
        counters.purge_objects.add(n as u64);
        if cache.shared.is_some() {
            return Step::Broadcast(inv, n, what);
        }
        purge_answer(n, &what, None)
    }

    /// Sends a PURGE applied here to the fleet and answers with what became of it.
    pub(super) async fn broadcast(&mut self, inv: Invalidation, n: usize, what: String) -> Step {
        let fleet = match &self.proxy.cache.shared {
            Some(shared) => Some(feed::broadcast(shared, inv).await),
            None => None,
        };
        purge_answer(n, &what, fleet.as_ref())
    }
}

/// The answer to a PURGE: 200 with what was removed (here, and from the shared tier), 404 if
/// nothing was cached; with a fleet, whether the other nodes confirmed it.
fn purge_answer(n: usize, what: &str, fleet: Option<&feed::Broadcast>) -> Step {
    let shared = fleet.map_or(0, |b| b.shared_removed);
    let status = if n > 0 || shared > 0 {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    let mut body = format!(
        "{} {}\npurged {n} object{} for {what}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        if n == 1 { "" } else { "s" }
    );
    if let Some(b) = fleet {
        body.push_str(&b.summary());
        body.push('\n');
    }
    Step::Deliver(deliver::generated(
        status,
        "text/plain; charset=utf-8",
        body,
        None,
    ))
}
