//! Fast hits: a fresh hit from memory answered from the request head's bytes, without hyper.
//! In steps: the head read and screened (`head.rs`), the policy asked and the object found
//! (`find.rs`), the answer made (`answer.rs`).
//!
//! Most of a small hit's cost was not the cache but the HTTP machinery around it: hyper
//! parsing the head into a request (a `HeaderMap` built and dropped), the request state
//! machine's bookkeeping, a clone of the delivery map, and hyper encoding eleven fields again
//! for every response (bench/RESULTS.md, "fast hits"). The gate (server/h1/) offers every
//! complete, bodiless request head it validated, while hyper has nothing in flight, to
//! [`Proxy::fast_hit`]; when this returns an answer the gate writes it itself — the object's
//! pre-serialised head ([`Prepared::wire`]), a `Date` line and the body — and hyper never sees
//! the request. Anything this path does not handle exactly as the state machine would is
//! declined (`None`) and takes the full path, so both give the same answer: a plain `GET` or
//! `HEAD` over HTTP/1.1 in origin form, one valid `Host`, none of the fields that change a
//! lookup or a delivery (conditionals, `Range`, `Authorization`, `Cache-Control` or `Pragma`
//! when `cache.request_cache_control` makes them count and `no-store` always, `Upgrade`,
//! `Connection`, `Expect`, body framing, the rewrite and untrusted forwarding fields and the
//! `_` names the full path removes), no operator rule that would answer or edit it
//! (`Rules::change_a_hit`), a fresh object in memory (of the request's variant when the URL has
//! `Vary` variants), whose status line is its status's own (`cache::status_line`). Under a VCL program, only when it provably changes nothing about the hit
//! (`proxy/vcl/dry_run.rs`). A stored gzip page asked for by a client without gzip is
//! answered from its identity representation when memory holds one (`represent/`: what the
//! full path sends then), and declined while there is none.
//!
//! [`Prepared::wire`]: crate::cache::Prepared::wire

mod answer;
mod find;
mod head;

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use super::body::ResponseBody;
use super::{Proxy, deliver};
use crate::cache::KeyText;
use crate::http::strict::{MAX_PART_FIELDS, Parts};

/// A fast hit's answer, for the gate to write.
pub struct FastAnswer {
    /// Status line and fields (`Prepared::wire`).
    pub head: Bytes,
    /// The head has no `Date` and no blank line yet: the writer adds both.
    pub add_date: bool,
    /// The object's body (empty for `HEAD`), counting bytes and completing the transaction
    /// record like any response body.
    pub body: ResponseBody,
}

impl Proxy {
    /// The answer to a request from its validated, bodiless `head` (where its parts are:
    /// `parts`, as the gate's strict parser found them) when it is a plain fresh hit from memory (see the module docs); `None` leaves the request to the full path,
    /// which then does every step itself. Counts what the full path counts for a hit, plus
    /// `cache_hit_fast`.
    /// `tls`: the client's TLS connection, for the transaction record. `listener`: the
    /// listener it came in on, as configured, when the configuration has `[[site]]`s.
    pub fn fast_hit(
        &self,
        head: &[u8],
        parts: &Parts,
        client: SocketAddr,
        tls: Option<&crate::tls::server::ConnTls>,
        listener: Option<SocketAddr>,
    ) -> Option<FastAnswer> {
        if !self.config.server.fast_hits {
            return None;
        }
        let started = Instant::now();
        let mut fields = [httparse::EMPTY_HEADER; MAX_PART_FIELDS];
        let head = self.read_head(head, parts, &mut fields, client)?;
        if !self.vcl_looks_up(&head, client) {
            return None;
        }
        let (site, rules) = self.site_of(&head, listener)?;
        // The key's text on the stack: a hit allocates no key (`KeyText`).
        let text = KeyText::new(head.host, head.target);
        let primary = text.key(0);
        let varies = self.cache.vary_names(&primary);
        if !self.rules_leave_alone(rules, &head, varies.as_deref(), tls) {
            return None;
        }
        let now = started;
        let (mut object, age) = self.fresh_in_memory(&head, primary, varies, now)?;
        let mut prepared = deliver::prepared_hit(&object, age).ok()?;
        if prepared.own_status {
            return None;
        }
        // Stored gzip for a client that does not take it: its identity representation from
        // memory (`represent/`), else the full path decodes it (a delivery filter,
        // `coding.rs`), as it does an origin's br or zstd; for a client that prefers br or
        // zstd, the full path serves their representation, as it does for an identity object
        // `[compression]` would gzip now (under rules). One flag for every other hit.
        let recodable = !prepared.gzip
            && prepared.decodable.is_none()
            && self.vcl.is_none()
            && self.representations.enabled()
            && prepared.recodable(|| super::coding::recodable(&self.config.compression, &object));
        if (prepared.gzip || recodable || prepared.decodable.is_some())
            && self.config.compression.enabled
        {
            use crate::http::accept_encoding::{Accepts, Coding};
            let accepts = Accepts::parse(
                head.fields
                    .iter()
                    .filter(|f| f.name.eq_ignore_ascii_case("accept-encoding"))
                    .map(|f| f.value),
            );
            let decoded = match prepared.decodable {
                Some(c) => !accepts.accepts(c),
                None => prepared.gzip && !accepts.accepts(Coding::Gzip),
            };
            if decoded && prepared.gzip && prepared.decodable.is_none() {
                // A stored gzip page for a client without gzip: its identity representation
                // (bench/ab2009.sh phpcached), when memory holds one.
                (object, prepared) = self.identity_in_memory(
                    (primary, &object),
                    &accepts,
                    rules,
                    (now, prepared.status.as_bytes()),
                )?;
            } else if decoded
                || (prepared.decodable.is_none()
                    && self
                        .representations
                        .preferred(&accepts, prepared.gzip)
                        .is_some())
            {
                return None;
            }
        }
        let vcl_head = self.vcl_deliver_head(&head, client, &object, &prepared)?;
        if let Some(site) = site {
            site.stats.req.inc();
            site.stats.hit.inc();
        }
        Some(self.answer(
            head,
            (client, tls, site.map(|s| &**s)),
            (object, &prepared, vcl_head),
            started,
        ))
    }
}
