//! Content codings per request (`[compression]`, docs/compression.md): which gzip filters
//! a request's fetch and delivery chains get. Store once, serve many, as Varnish's
//! `http_gzip_support`: a cache fill asks the origin for gzip; an identity body of a
//! compressible type and length is gzipped once as it is fetched (`Gzip`) and stored so; an
//! origin's gzip is stored as it came, checked as it streams (`TestGunzip`; its br or zstd,
//! `TestDecode`); a client that
//! does not take gzip gets stored gzip decoded as it is sent (`Gunzip`). So one stored
//! object answers every client, and its `Vary: Accept-Encoding` does not split the variants
//! (the selection an object is stored under leaves the field out: [`varies_on_coding`]).

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

use std::sync::Arc;

use super::filter::gzip::{self, Gunzip, Gzip, TestGunzip};
use super::represent::Found;
use super::txn::Txn;
use crate::backend::Backend;
use crate::cache::{CacheKey, Object};
use crate::config::BackendProtocol;
use crate::http::accept_encoding::{Accepts, Coding};

/// Reads the client's `Accept-Encoding` (before any normalisation).
pub(super) fn on_request(txn: &mut Txn) {
    txn.filters.coding.accepts = Accepts::parse(
        txn.req
            .headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .map(HeaderValue::as_bytes),
    );
}

/// The `Accept-Encoding` a backend request sends: for a cache fill gzip, whatever the
/// client said (every client is served from what is stored, decoded for those without
/// gzip); for a pass, and a fill from an origin that picks precompressed siblings
/// ([`picks_siblings`]), the codings the client takes, whatever its spelling (the key's
/// normalisation kept only its class).
pub(super) fn backend_request(
    txn: &Txn,
    backend: &Backend,
    headers: &mut HeaderMap,
    for_cache: bool,
) {
    if !txn.proxy.config.compression.enabled {
        return;
    }
    let value = if for_cache && !picks_siblings(backend) {
        Some("gzip")
    } else {
        txn.filters.coding.accepts.field()
    };
    match value {
        Some(v) => {
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(v));
        }
        None => {
            headers.remove(header::ACCEPT_ENCODING);
        }
    }
}

/// Whether `backend` picks a representation by `Accept-Encoding` itself among bytes it
/// holds: a files origin with `precompressed` (`NAME.br`, `.zst`, `.gz`). Its fills ask with
/// the client's codings, and what it picked is stored as a variant per class of client (the
/// normalised `Accept-Encoding`) with the sibling's own `ETag`, rather than one gzip object
/// decoded or re-encoded for every client.
fn picks_siblings(backend: &Backend) -> bool {
    backend.config.protocol == BackendProtocol::Files && backend.config.precompressed
}

/// A response [`picks_siblings`]'s origin chose by `Accept-Encoding` (it says so with
/// `Vary: Accept-Encoding` only for a file with a sibling).
fn sibling_chosen(txn: &Txn, fields: &HeaderMap) -> bool {
    txn.backend.as_deref().is_some_and(picks_siblings)
        && crate::cache::policy::vary_names(fields)
            .is_some_and(|names| names.contains(&header::ACCEPT_ENCODING))
}

/// The fetch chain's gzip filters for a fetched response (`for_cache`: a fill, not a pass;
/// `refused`: the storage decision will not store it), before the chain's head runs over it.
pub(super) fn on_response(
    txn: &mut Txn,
    status: StatusCode,
    fields: &HeaderMap,
    for_cache: bool,
    refused: bool,
) {
    let negotiated = txn.filters.coding;
    let config = &txn.proxy.config.compression;
    let counters = &txn.proxy.counters;
    let coding = gzip::coding(fields);
    if !has_body(status, &txn.req.method) || gzip::no_transform(fields) {
        return;
    }
    // ESI on (`filter/esi/`): the page is parsed and stored identity, so an origin's gzip
    // is decoded at fetch and nothing is gzipped; whether the assembled page goes out gzip
    // to clients that take it is marked on the page (`esi_gzip`).
    let esi = txn.filters.esi.is_some();
    if let Some(slot) = &txn.filters.esi {
        // A page without ESI stays marked only when the mark is the origin's or the
        // policy's own word, not `[compression]`'s default (which gzips such a page as any
        // object: `represent.rs`).
        let plain = coding == Some(Coding::Gzip) || negotiated.gzip == Some(true);
        slot.set_gzip(esi_gzip(negotiated, config, coding), plain);
    }
    if (negotiated.gunzip || esi) && coding == Some(Coding::Gzip) {
        txn.filters
            .fetch
            .push(Box::new(Gunzip::at_fetch(counters.clone())));
        return;
    }
    // A response that will not be stored is gzipped only for a client that takes gzip
    // (for one that does not it would be decoded again at once).
    if esi {
        return;
    }
    // A file the origin chose among its siblings is stored as chosen, per class of client:
    // gzipped only for a client that takes gzip (one without would have it decoded again).
    let sibling = sibling_chosen(txn, fields);
    let wanted = match negotiated.gzip {
        Some(wanted) => wanted && (!sibling || negotiated.accepts.accepts(Coding::Gzip)),
        // Under VCL only `beresp.do_gzip` compresses, as in Varnish.
        None => {
            config.enabled
                && txn.policy == super::txn::Policy::Rules
                && for_cache
                && compressible(config, status, fields)
                && (negotiated.accepts.accepts(Coding::Gzip)
                    || !(sibling || refused || never_stored(fields)))
        }
    };
    // What a fill stores encoded, it stores with its identity's length (and strong ETag):
    // the decoded copy then has a `Content-Length` and answers Range (`cache/identity.rs`).
    let decoded = std::sync::Arc::new(gzip::Decoded::default());
    match coding {
        Some(Coding::Identity) if wanted => {
            let level = fields
                .get(header::CONTENT_TYPE)
                .map_or(config.gzip_level, |t| config.gzip_level_for(t.as_bytes()));
            let mut filter = Gzip::new(level, counters.clone());
            if for_cache {
                filter = filter.recording(decoded.clone());
                txn.filters.identity = Some(decoded);
            }
            txn.filters.fetch.push(Box::new(filter));
        }
        Some(Coding::Gzip) if for_cache && config.enabled => {
            let filter = TestGunzip::new(counters.clone()).recording(decoded.clone());
            txn.filters.identity = Some(decoded);
            txn.filters.fetch.push(Box::new(filter));
        }
        // An origin's br or zstd is stored as it came, per class of client: checked as it
        // streams, so a malformed one is never stored (`filter/decode.rs`).
        Some(Coding::Br | Coding::Zstd) if for_cache && config.enabled => {
            txn.filters
                .fetch
                .push(Box::new(super::filter::TestDecode::new(counters.clone())));
        }
        _ => {}
    }
}

/// Whether an ESI page fetched in `coding` goes out gzip to clients that take it, as
/// Varnish stores it gzip: the origin sent it gzip and the policy did not decode it
/// (`beresp.do_gunzip`), or it came identity and the policy gzips it (`beresp.do_gzip`, a
/// rule's `compress`; with neither, `[compression] enabled` under rules — under VCL only
/// `do_gzip` compresses).
fn esi_gzip(
    negotiated: super::filter::Negotiated,
    config: &crate::config::compression::CompressionConfig,
    coding: Option<Coding>,
) -> bool {
    match coding {
        Some(Coding::Gzip) => !negotiated.gunzip,
        Some(Coding::Identity) => negotiated.gzip.unwrap_or(config.enabled),
        _ => false,
    }
}

/// Whether the client takes gzip (its `Accept-Encoding`, as negotiated for this request).
pub(super) fn takes_gzip(txn: &Txn) -> bool {
    txn.filters.coding.accepts.accepts(Coding::Gzip)
}

/// `Cache-Control: no-store` or `private`: a response no shared cache stores.
fn never_stored(fields: &HeaderMap) -> bool {
    let cc = crate::http::cache_control::CacheControl::from_headers(fields);
    cc.no_store || cc.private
}

/// A status and method whose response has a representation body.
fn has_body(status: StatusCode, method: &Method) -> bool {
    *method != Method::HEAD
        && status != StatusCode::NO_CONTENT
        && status != StatusCode::NOT_MODIFIED
        && status != StatusCode::PARTIAL_CONTENT
        && !status.is_informational()
}

/// `[compression]`'s choice for an identity response: a 200 of a listed type, not shorter
/// than `min_length` when its length is known.
fn compressible(
    config: &crate::config::compression::CompressionConfig,
    status: StatusCode,
    fields: &HeaderMap,
) -> bool {
    if status != StatusCode::OK {
        return false;
    }
    let long_enough = match fields
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        Some(len) => len >= config.min_length.0.max(1),
        None => true,
    };
    long_enough
        && fields
            .get(header::CONTENT_TYPE)
            .is_some_and(|t| config.compressible(t.as_bytes()))
}

/// Adds the delivery chain's decoder when the response is in a coding the client does not
/// take: `Gunzip` for gzip, `Decode` for br or zstd (an origin's, `filter/decode.rs`).
/// Called where a response is formed (a stored object, a stream); at most one per chain.
pub(super) fn on_delivery(txn: &mut Txn, coding: Option<Coding>) {
    if !txn.proxy.config.compression.enabled {
        return;
    }
    let accepts = &txn.filters.coding.accepts;
    match coding {
        Some(Coding::Gzip)
            if !accepts.accepts(Coding::Gzip) && !txn.filters.deliver.has("gunzip") =>
        {
            txn.filters
                .deliver
                .push(Box::new(Gunzip::new(txn.proxy.counters.clone())));
            txn.filters.coding.decoded = true;
        }
        Some(c @ (Coding::Br | Coding::Zstd))
            if !accepts.accepts(c) && !txn.filters.deliver.has("decode") =>
        {
            txn.filters
                .deliver
                .push(Box::new(super::filter::Decode::new(
                    txn.proxy.counters.clone(),
                )));
        }
        _ => {}
    }
}

/// A Range from a client that takes gzip, made conditional (`If-Range`) on the strong `ETag`
/// of the identity of a stored gzip object (`cache/identity.rs`): the client holds part of
/// the identity bytes, so the range is answered from them, decoded (RFC 9110 §13.1.5: a
/// strong validator names exactly one representation).
pub(super) fn identity_for_if_range(txn: &mut Txn, object: &crate::cache::Object) {
    let Some(if_range) = txn.req.headers.get(header::IF_RANGE) else {
        return;
    };
    if !txn.req.headers.contains_key(header::RANGE)
        || txn.filters.deliver.has("gunzip")
        || !txn.proxy.config.compression.enabled
        || !stored_gzip(&object.headers)
    {
        return;
    }
    let named = object
        .headers
        .values(crate::cache::identity::FIELD)
        .next()
        .and_then(crate::cache::identity::Identity::parse)
        .and_then(|identity| identity.etag)
        .is_some_and(|etag| etag.as_bytes() == if_range.as_bytes().trim_ascii());
    if named {
        txn.filters
            .deliver
            .push(Box::new(Gunzip::new(txn.proxy.counters.clone())));
        txn.filters.coding.decoded = true;
    }
}

/// What answers a client from a stored object: the object, or its br or zstd
/// representation (`represent/`).
pub(super) enum Chosen {
    Object(Arc<Object>),
    /// The client prefers `Coding`, whose representation memory does not hold: the tiers
    /// below are asked for the one stored under the key (`Step::RepresentationIo`).
    Io(Arc<Object>, CacheKey, Coding),
}

/// The br or zstd representation of a stored object for a client that prefers it, or the
/// identity of a stored gzip one for a client without gzip (`represent/`), when one is built; else `object` (and the hit counts towards building
/// one). Which objects: a stored gzip `200` (one Shellac made or an origin's, under
/// `[[rule]]`s or VCL alike: under VCL its gzip is `beresp.do_gzip`'s or the origin's), and
/// under `[[rule]]`s an identity `200` that `[compression]` would gzip now (stored under an
/// older configuration, or from a fleet peer): never `no-transform`, an ESI page, or a
/// response a rule says `compress = false` of.
pub(super) fn representation(txn: &Txn, object: Arc<Object>) -> Chosen {
    let reps = &txn.proxy.representations;
    if !(reps.enabled() || reps.builds_identity()) || object.status != StatusCode::OK {
        return Chosen::Object(object);
    }
    let gzip = stored_gzip(&object.headers);
    // The client's preference first: a hit for a client that takes nothing better than what
    // is stored ends here, before the object's fields are read again (the HTTP/2 hit path
    // has no prepared head that remembers them).
    let (Some(key), Some(coding)) = (&txn.key, reps.preferred(&txn.filters.coding.accepts, gzip))
    else {
        return Chosen::Object(object);
    };
    if crate::esi::marked(object.headers.block())
        || crate::http::cache_control::no_transform(object.headers.values("cache-control"))
        || !(gzip || recodable_identity(txn, &object))
        // `If-Range` names the object's bytes (its strong ETag: identity_for_if_range).
        || (txn.req.headers.contains_key(header::IF_RANGE)
            && txn.req.headers.contains_key(header::RANGE))
        || (txn.policy == super::txn::Policy::Rules
            && txn
                .proxy
                .rules
                .compress(&txn.matched_rules, object.status, object.headers.map())
                == Some(false))
    {
        return Chosen::Object(object);
    }
    match reps.lookup(&txn.proxy.cache, &txn.proxy.counters, key, &object, coding) {
        Found::Rep(rep) => Chosen::Object(rep),
        Found::Absent => Chosen::Object(object),
        Found::NeedsIo(rep_key) => Chosen::Io(object, rep_key, coding),
    }
}

/// A stored identity object `[compression]` would gzip at fetch now, under `[[rule]]`s (under
/// VCL only `beresp.do_gzip` compresses, as in Varnish).
fn recodable_identity(txn: &Txn, object: &Object) -> bool {
    txn.policy == super::txn::Policy::Rules && recodable(&txn.proxy.config.compression, object)
}

/// An identity `200` (no `Content-Encoding`, not `no-transform`) of a listed type, not
/// shorter than `min_length`: what `[compression]` gzips at fetch.
pub(super) fn recodable(
    config: &crate::config::compression::CompressionConfig,
    object: &Object,
) -> bool {
    config.enabled
        && object.status == StatusCode::OK
        && object.headers.values("content-encoding").next().is_none()
        && object.body_len >= config.min_length.0.max(1)
        && !crate::http::cache_control::no_transform(object.headers.values("cache-control"))
        && !crate::esi::marked(object.headers.block())
        && object
            .headers
            .values("content-type")
            .next()
            .is_some_and(|t| config.compressible(t))
}

/// Whether a stored object's fields say gzip (`cache/representation.rs`).
pub(super) use crate::cache::representation::stored_gzip;

/// Whether a response to be stored must keep `Accept-Encoding` in its `Vary` selection:
/// when its coding is one Shellac cannot turn into what another client takes (neither
/// identity nor gzip, or compression is off), or an origin chose it among precompressed
/// siblings ([`sibling_chosen`]). Otherwise one object answers every client.
pub(super) fn varies_on_coding(txn: &Txn, fields: &HeaderMap) -> bool {
    !txn.proxy.config.compression.enabled
        || !matches!(gzip::coding(fields), Some(Coding::Identity | Coding::Gzip))
        || sibling_chosen(txn, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_takers() {
        for (lines, takes) in [
            (&[][..], false),
            (&["gzip, deflate, br, zstd"][..], true),
            (&["br"][..], false),
            (&["gzip;q=0, br"][..], false),
            (&["*"][..], true),
            (&["identity"][..], false),
            (&["deflate", "x-gzip"][..], true),
        ] {
            assert_eq!(
                Accepts::parse(lines.iter().map(|l| l.as_bytes())).accepts(Coding::Gzip),
                takes,
                "{lines:?}"
            );
        }
    }

    #[test]
    fn compressible_by_type_and_length() {
        let config = crate::config::compression::CompressionConfig::default();
        let fields = |t: &str, len: Option<u64>| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_str(t).unwrap());
            if let Some(len) = len {
                h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            }
            h
        };
        assert!(compressible(
            &config,
            StatusCode::OK,
            &fields("text/html", Some(512))
        ));
        assert!(compressible(
            &config,
            StatusCode::OK,
            &fields("text/html", None)
        ));
        assert!(!compressible(
            &config,
            StatusCode::OK,
            &fields("text/html", Some(511))
        ));
        assert!(!compressible(
            &config,
            StatusCode::OK,
            &fields("image/png", Some(5000))
        ));
        assert!(!compressible(
            &config,
            StatusCode::NOT_FOUND,
            &fields("text/html", None)
        ));
        assert!(!compressible(&config, StatusCode::OK, &HeaderMap::new()));
    }
}
