//! Big media in slices (`cache.slice`, nginx's `slice` module, ATS's slice plugin): a
//! representation longer than `max_object_size` is cached as aligned slices of `slice_size`
//! bytes, each an object of its own in the tiers, fetched with `Range: bytes=a-b` on a miss.
//!
//! ```text
//!  a response > max_object_size ──learn──► cache::slices (length, validator)
//!  Lookup: no whole object, URL known ──► Step::Slices ──► serve.rs: preconditions, Range,
//!      the first slice (acquire.rs: tiers → coalesced fetch) before the head, the rest
//!      streamed by a task slice after slice (pump.rs); a HEAD reads no slice (head.rs)
//! ```
//!
//! How a URL becomes sliced (`learn`): the usual path fetches it, and the response that shows
//! its length (a 200's `Content-Length`, a forwarded Range's `Content-Range`) goes to the
//! client uncached as before — but when it is storable, has a strong validator and no `Vary`,
//! the URL, its length and validator are remembered (`cache/slices.rs`). From
//! then on a request for it is answered from slices (`serve.rs`), fetched one at a time as the
//! client reads. A Range starting at or past `max_object_size` of a URL not known yet (it can
//! only be a big object) is asked as its slice at once (`probe`).
//!
//! Policy: each slice fetched is a backend transaction of its own (`backend.rs`): the
//! policy's backend-request and backend-response steps (VCL's vcl_backend_fetch and
//! vcl_backend_response, a rule's response actions) run for it as for any backend fetch, and
//! its storage decision is the slice's own (an uncacheable slice is sent, not stored).
//!
//! Seeks: an `flv` or `mp4` rule's `?start=` is cut from the slices it needs (`seek.rs`): an
//! MP4's `moov` is read from the slices that hold it before the head goes out, then only the
//! slices of the kept media data are sent.
//!
//! Consistency: a fetched slice must carry the representation's validator and `Content-Range`;
//! otherwise every slice of the URL is invalidated (`slice_validator_mismatch`) and the client
//! response is restarted if its head has not gone out, cut otherwise (never mixed versions).
//! An origin answering a slice request with 200 (it ignores Range) is passed through uncached
//! and the URL is not sliced for `hit_for_miss_ttl` (`slice_range_ignored`).

mod acquire;
mod backend;
mod head;
mod origin;
mod pump;
mod seek;
mod seek_answer;
mod serve;

use std::sync::Arc;

use http::header::{self, HeaderMap};
use http::{Method, StatusCode};

use http::response::Parts;

use super::policy::Storage;
use super::txn::{Step, Txn};
use crate::cache::CacheKey;
use crate::cache::partial::{Validator, content_range};
use crate::cache::policy::{Exchange, StorePlan};
use crate::cache::slices::SliceMeta;
pub(super) use origin::Requester;

/// The Lookup decision: a request for a URL known to be sliced, with no whole object stored,
/// is answered from slices. `None`: the usual path.
pub(super) fn decide(txn: &Txn, primary: &CacheKey) -> Option<Step> {
    if !txn.proxy.config.cache.slice
        || txn.authorized
        || !matches!(txn.req.method, Method::GET | Method::HEAD)
        || txn.request_directives()
    {
        return None;
    }
    if let Some(meta) = txn.proxy.cache.slices.get(primary) {
        return Some(Step::Slices(meta));
    }
    probe(txn, primary)
}

/// A Range that starts at or beyond `max_object_size` can only be satisfied by a big object:
/// for a URL not known yet it is asked as the slice holding its first byte, whose
/// `Content-Range` tells the length (`serve.rs` with a meta of unknown length).
fn probe(txn: &Txn, primary: &CacheKey) -> Option<Step> {
    // A seek's Range is not cut from the representation (`serve.rs`): the usual path.
    if txn.req.method != Method::GET
        || txn.head_only
        || txn.flv_start.is_some()
        || txn.mp4_start.is_some()
    {
        return None;
    }
    let mut ranges = txn.req.headers.get_all(header::RANGE).iter();
    let (Some(range), None) = (ranges.next(), ranges.next()) else {
        return None;
    };
    let start = first_byte(range.to_str().ok()?)?;
    let proxy = &txn.proxy;
    if start < proxy.max_object_size
        || proxy.config.cache.slice_size.0 > proxy.max_object_size
        || proxy
            .cache
            .slices
            .is_refused(primary, std::time::Instant::now())
        || txn.req.headers.contains_key(header::IF_RANGE)
    {
        return None;
    }
    Some(Step::SliceProbe(start))
}

/// The first byte of a single `bytes=a-[b]` range.
fn first_byte(text: &str) -> Option<u64> {
    let spec = text.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (first, _) = spec.split_once('-')?;
    first.trim().parse().ok()
}

/// Where a storable response is found longer than `max_object_size`: remembers its URL as
/// sliced when it may be (slicing on, a GET without `Authorization`, no `Vary`, a strong
/// validator, slices that fit `max_object_size`). The response itself goes on as before.
/// `length`: the representation's complete length; `headers`: the response's fields.
pub(super) fn learn(txn: &Txn, headers: &HeaderMap, length: u64, plan: &StorePlan) -> bool {
    let proxy = &txn.proxy;
    let cfg = &proxy.config.cache;
    let size = cfg.slice_size.0;
    if !cfg.slice
        || size > proxy.max_object_size
        || length <= proxy.max_object_size
        || txn.authorized
        || !matches!(txn.req.method, Method::GET | Method::HEAD)
        || !plan.vary.is_empty()
        || headers.contains_key(header::VARY)
        || headers
            .get(header::CONTENT_ENCODING)
            .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"))
    {
        return false;
    }
    let (Some(primary), Some(validator)) = (&txn.key, Validator::of(headers)) else {
        return false;
    };
    let meta = SliceMeta::new(length, validator, size, fields(headers));
    let learnt = proxy
        .cache
        .slices
        .learn(primary, meta, &*proxy.cache.storage);
    if learnt {
        proxy.counters.slice_learnt.inc();
    }
    learnt
}

/// Big media: a forwarded Range whose `Content-Range` shows a representation longer than
/// `max_object_size` makes the URL answered from slices from now on, with the lifetimes the
/// policy's storage decision gives that 206 (`storage`: a policy that refuses to store it
/// leaves the URL unsliced); the 206 goes to the client as it is.
pub(super) fn learn_ranged(txn: &Txn, parts: &Parts, storage: &Storage, ex: &Exchange) {
    let Some((_, _, length)) = content_range(&parts.headers) else {
        return;
    };
    if !txn.proxy.config.cache.slice || length <= txn.proxy.max_object_size {
        return;
    }
    if let Ok(plan) = storage.plan(parts.status, &parts.headers, ex, txn.cache_config()) {
        learn(txn, &parts.headers, length, &plan);
    }
}

/// The fields that describe the representation (what conditionals are evaluated against, and
/// a 304 carries): framing and range fields removed.
fn fields(headers: &HeaderMap) -> HeaderMap {
    let mut h = headers.clone();
    for name in [
        header::CONTENT_LENGTH,
        header::CONTENT_RANGE,
        header::TRANSFER_ENCODING,
        header::AGE,
        header::CONNECTION,
    ] {
        h.remove(name);
    }
    h
}

/// The `Cache-Status` detail words of a sliced response.
const DETAIL: &str = "detail=slice";

/// How a slice could not be had.
pub(super) enum SliceFailure {
    /// Its validator or length differed: every slice of the URL was invalidated.
    Changed,
    /// The origin answered the slice request with 200 (Range ignored): that response, to pass
    /// through.
    Ignored(Box<(http::response::Parts, crate::backend::BackendBody)>),
    /// The origin answered something else (an error, 416): that response.
    Answer(Box<(http::response::Parts, crate::backend::BackendBody)>),
    /// No response: the status and detail to answer with.
    Failed(StatusCode, &'static str),
}

/// What a sliced client response reads from: the URL, what is known of it, and what each
/// slice's backend transaction starts from (`backend.rs`).
pub(super) struct Ctx {
    pub proxy: Arc<super::Proxy>,
    pub primary: CacheKey,
    pub meta: Arc<SliceMeta>,
    /// The client request's head, as its policy left it (each slice's fetch is asked for it).
    pub req: http::request::Parts,
    pub client: std::net::SocketAddr,
    /// What the client request leaves each slice's backend transaction.
    pub inherited: super::txn::Inherited,
    /// The client request's fields (bans on request fields are checked against them).
    pub req_headers: HeaderMap,
    /// A seek's response: the slices its cut read (counted in `slice_seek_slices` already).
    /// `None`: not a seek.
    pub seek: Option<Vec<u64>>,
}

impl Ctx {
    /// Counts slice `index` in `slice_seek_slices` when it is read for a seek and its cut did
    /// not count it already.
    pub fn count_seek_slice(&self, index: u64) {
        if let Some(counted) = &self.seek
            && !counted.contains(&index)
        {
            self.proxy.counters.slice_seek_slices.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_of_single_ranges() {
        assert_eq!(first_byte("bytes=100-"), Some(100));
        assert_eq!(first_byte("bytes= 5-9"), Some(5));
        assert_eq!(first_byte("bytes=-5"), None);
        assert_eq!(first_byte("bytes=1-2,5-6"), None);
        assert_eq!(first_byte("items=1-2"), None);
    }
}
