//! A fast hit's middle steps: whether the policy leaves the request alone (a VCL program's
//! vcl_recv run dry on the head, `vcl/dry_run.rs`; its `[[site]]` known, caching and not
//! rewriting; no operator rule — the site's, else the global ones — acting on it), and the
//! object that answers it — fresh, in memory, of the request's variant, unbanned, not due for
//! refresh-ahead.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::super::site::{Choice, Site};
use super::super::{Proxy, deliver};
use super::head::Head;
use crate::cache::ban::BanCheck;
use crate::cache::vary::{VaryIndex, variant_hash};
use crate::cache::{Body, KeyRef, Object, Prepared, representation};
use crate::http::accept_encoding::{Accepts, Coding};
use crate::rules::Rules;

impl Proxy {
    /// Under a VCL program: whether vcl_recv, run on this head, looks it up unchanged and the
    /// program's vcl_hash, vcl_hit and vcl_deliver are the built-in ones. Without one: true.
    /// Never while Varnish-style records are kept (`log.vsl_records`): the full path logs them.
    #[inline]
    pub(super) fn vcl_looks_up(&self, head: &Head<'_, '_>, client: SocketAddr) -> bool {
        match &self.vcl {
            Some(rt) if rt.vsl.is_some() => false,
            Some(rt) => super::super::vcl::recv_looks_up(
                rt,
                head.method.as_str(),
                head.target,
                head.fields,
                client,
                self.config.cache.normalize_accept_encoding,
            ),
            None => true,
        }
    }

    /// The request's `[[site]]` (`None` without sites, or on a listener without any) and the
    /// rules it runs under; `None` when the full path must answer: rewrites would change the
    /// target, the site does not cache, or its host is unknown there.
    #[inline]
    pub(super) fn site_of(
        &self,
        head: &Head<'_, '_>,
        listener: Option<SocketAddr>,
    ) -> Option<(Option<&Arc<Site>>, &Rules)> {
        let Some(sites) = &self.sites else {
            return self.rewrites.is_empty().then_some((None, &self.rules));
        };
        match sites.choose(listener, head.host) {
            Choice::Unknown => None,
            Choice::Global => self.rewrites.is_empty().then_some((None, &self.rules)),
            Choice::Site(site) => {
                let rewrites = site.rewrites.as_ref().unwrap_or(&self.rewrites);
                // A site with its own VCL program: its hits run it (the full path).
                if !site.cache || !rewrites.is_empty() || site.vcl.is_some() {
                    return None;
                }
                Some((Some(site), site.rules.as_ref().unwrap_or(&self.rules)))
            }
        }
    }

    /// Whether no operator rule of `rules` would answer or edit this request
    /// (`Rules::change_a_hit`).
    #[inline]
    pub(super) fn rules_leave_alone(
        &self,
        rules: &Rules,
        head: &Head<'_, '_>,
        varies: Option<&VaryIndex>,
        tls: Option<&crate::tls::server::ConnTls>,
    ) -> bool {
        // Whether a rule stripping the request's cookies would change this hit: only if the
        // URL varies on them or the access log prints them.
        let cookies_matter = varies
            .is_some_and(|index| index.names.contains(&http::header::COOKIE))
            || self
                .log_format
                .as_ref()
                .is_some_and(|f| f.request_headers.contains(&http::header::COOKIE));
        if !rules.act_on_requests(cookies_matter, seeks(head.target)) {
            return true;
        }
        // Only a request no rule acts on is a plain hit. The rules' header and cookie
        // matchers read a map: built here only when such rules are configured.
        let mut map = HeaderMap::with_capacity(head.fields.len());
        for field in head.fields {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(field.name.as_bytes()),
                HeaderValue::from_bytes(field.value),
            ) else {
                return false;
            };
            map.append(name, value);
        }
        !rules.change_a_hit(
            head.host,
            head.target,
            &head.method,
            &map,
            cookies_matter,
            crate::rules::Conn {
                https: tls.is_some(),
                client_cert: tls.and_then(|t| t.client.as_deref()).unwrap_or(""),
                ..Default::default()
            },
        )
    }

    /// The object that answers `head` (URL `primary`, whose variants `varies` lists) as a
    /// plain hit, judged fresh at `now` (the request's start: one clock read per hit fewer),
    /// and its age then;
    /// `None` when there is none in memory or the full path must judge it (stale, banned or a
    /// ban needing the request, due for refresh-ahead).
    #[inline]
    pub(super) fn fresh_in_memory(
        &self,
        head: &Head<'_, '_>,
        primary: KeyRef<'_>,
        varies: Option<Arc<VaryIndex>>,
        now: Instant,
    ) -> Option<(Arc<Object>, Duration)> {
        let cache = &self.cache;
        // A URL with variants: its variant from the request fields its `Vary` names, as the
        // full path computes it (`Cache::variant_key`, Accept-Encoding normalised first).
        let selection = match varies {
            None => None,
            Some(index) => {
                let mut selected = HeaderMap::with_capacity(index.names.len());
                for field in head.fields {
                    if let Some(name) = index
                        .names
                        .iter()
                        .find(|n| field.name.eq_ignore_ascii_case(n.as_str()))
                    {
                        selected.append(name.clone(), HeaderValue::from_bytes(field.value).ok()?);
                    }
                }
                if self.config.cache.normalize_accept_encoding {
                    super::super::judge::normalize_for(self.vcl.is_some(), &mut selected);
                }
                let variant = variant_hash(&index.names, &selected);
                Some((primary.with_variant(variant), selected))
            }
        };
        let key = selection.as_ref().map_or(primary, |(k, _)| *k);
        let object = cache.lookup_now_ref(key).ok()??;
        let matches = match &selection {
            Some((_, selected)) => object.vary_matches(selected),
            None => object.vary().is_empty(),
        };
        // An object with an ESI program is assembled on delivery (`filter/esi/`): one
        // comparison of the stored fields' first bytes.
        if !matches
            || !matches!(object.body, Body::Memory(_))
            || crate::esi::marked(object.headers.block())
        {
            return None;
        }
        match cache.check_bans_ref(key, &object, None) {
            BanCheck::Clear => {}
            BanCheck::Banned => {
                // Removed: the full path finds no copy and fetches.
                self.counters.ban_objects.inc();
                return None;
            }
            // A ban on a request field may apply: the full path checks it with the request.
            BanCheck::NeedsRequest => return None,
        }
        // Only a fresh object (`Object::is_fresh`): a stale one needs grace handling or
        // revalidation — and a stored `no-cache` response is stale from the start (TTL 0), so
        // it is never a fast hit. Its age read once, for the answer's fields too.
        let age = object.age(now);
        let ttl = object.ttl.get();
        if age >= ttl {
            return None;
        }
        // Within `cache.refresh_ahead` (or the object's own `obj.prefetch`) of expiry
        // (`Object::remaining_ttl`): the full path delivers it and starts the background
        // refresh.
        let configured = self.config.cache.refresh_ahead;
        if let Some(window) = object.prefetch.window(|| configured.window(ttl))
            && ttl - age <= window
        {
            return None;
        }
        Some((object, age))
    }

    /// For a client that takes no gzip (`accepts`), the identity representation of
    /// `object`, a fresh stored gzip page (`represent/`), with its delivery fields under
    /// `cache_status` (the object's): what the full path sends that client
    /// (`coding::representation`), when memory holds one made from these bytes and nothing
    /// else could decide otherwise — no VCL program, no rule saying `compress`, no br or zstd
    /// representation preferred. Counted as served. `None`: the full path answers (it
    /// decodes the page and counts the hit towards building the representation).
    pub(super) fn identity_in_memory(
        &self,
        (primary, object): (KeyRef<'_>, &Arc<Object>),
        accepts: &Accepts,
        rules: &Rules,
        (now, cache_status): (Instant, &[u8]),
    ) -> Option<(Arc<Object>, Arc<Prepared>)> {
        if self.vcl.is_some()
            || object.status != StatusCode::OK
            || rules.say_compress()
            || self.rules.say_compress()
            || self.representations.preferred(accepts, true) != Some(Coding::Identity)
        {
            return None;
        }
        let rep = self
            .representations
            .stored(&self.cache, primary, Coding::Identity)?;
        // Counted as the object's tier (the hit counters read the answering object's).
        if !matches!(rep.body, Body::Memory(_)) || rep.state.from_disk() != object.state.from_disk()
        {
            return None;
        }
        if !made_from(&rep, object) {
            return None;
        }
        let prepared = deliver::prepared(&rep, now, cache_status).ok()?;
        self.counters.compress_encoded_served.inc();
        Some((rep, prepared))
    }
}

thread_local! {
    /// The last (source, representation) pair a fast hit on this thread found made from the
    /// same bytes. Weak references: their allocations are not reused while held, so the same
    /// addresses are the same objects, and objects never change.
    static MADE_FROM: RefCell<Option<(Weak<Object>, Weak<Object>)>> = const { RefCell::new(None) };
}

/// Whether `rep` was made from `source`'s very bytes (the full path's test,
/// `Representations::lookup`): remembered for the last pair this thread checked, so the hits
/// of a hot page neither hash the source's fields nor parse the representation's
/// `shellac-source` each time (~1,300 of a phpcached hit's ~12,000 instructions, callgrind).
fn made_from(rep: &Arc<Object>, source: &Arc<Object>) -> bool {
    MADE_FROM.with(|last| {
        if let Ok(last) = last.try_borrow()
            && let Some((s, r)) = last.as_ref()
            && std::ptr::eq(s.as_ptr(), Arc::as_ptr(source))
            && std::ptr::eq(r.as_ptr(), Arc::as_ptr(rep))
        {
            return true;
        }
        let made = representation::source(rep) == Some(representation::generation(source));
        if made && let Ok(mut last) = last.try_borrow_mut() {
            *last = Some((Arc::downgrade(source), Arc::downgrade(rep)));
        }
        made
    })
}

/// Whether `target`'s query holds a `start=` (an FLV or MP4 seek a `flv`/`mp4` rule acts on,
/// `proxy/filter/flv.rs`): only a query can, so a target without `?` is not searched (a
/// `contains("start=")` over the whole target cost ~250 instructions a hit, 6 `memcmp`s for
/// `/file6k.png`). The `?` found with `memchr` (`str::split_once`'s char searcher cost ~180
/// instructions a hit on an 11-byte target, callgrind).
fn seeks(target: &str) -> bool {
    memchr::memchr(b'?', target.as_bytes()).is_some_and(|at| target[at..].contains("start="))
}

#[cfg(test)]
mod seek_tests {
    use super::seeks;

    #[test]
    fn only_a_query_seeks() {
        assert!(seeks("/v.flv?start=5"));
        assert!(seeks("/v.mp4?a=1&start=2.5"));
        assert!(
            seeks("/v.flv?restart=5"),
            "as the rules' check: the filter decides"
        );
        assert!(!seeks("/file6k.png"));
        assert!(!seeks("/start=5/v.flv"));
        assert!(!seeks("/v.flv?"));
    }
}
