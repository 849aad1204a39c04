//! How a response to a request is formed once the machine knows what answers it: a stored
//! object with the request's conditionals and Range applied, a stale copy served because no
//! backend could answer, a streamed body cut to the request's Range.

use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{Method, Response, StatusCode};

use super::body::ResponseBody;
use super::deliver;
use super::filter::mp4_source::ReadAt;
use super::filter::{esi, flv, mp4};
use super::partial::{self, RangeSpec};
use super::txn::{Mp4Cut, RepresentationIo, Step, Txn};
use crate::cache::Object;
use crate::http::fields::has_field;

impl Txn {
    /// A stored object, with the request's conditionals and Range applied.
    pub(super) fn deliver_object(&mut self, object: Arc<Object>, cache_status: &str) -> Step {
        self.deliver_object_at(object, cache_status, Instant::now())
    }

    /// Like [`Txn::deliver_object`], with `Age` computed at `now`.
    pub(super) fn deliver_object_at(
        &mut self,
        object: Arc<Object>,
        cache_status: &str,
        now: Instant,
    ) -> Step {
        let object = match super::coding::representation(self, object) {
            super::coding::Chosen::Object(object) => object,
            super::coding::Chosen::Io(object, rep_key, coding) => {
                return Step::RepresentationIo(Box::new(RepresentationIo {
                    object,
                    rep_key,
                    coding,
                    cache_status: cache_status.to_string(),
                    now,
                }));
            }
        };
        self.deliver_chosen(object, cache_status, now)
    }

    /// After `Step::RepresentationIo`: the representation from the tiers below when they
    /// hold one made from the object's bytes, else the object.
    pub(super) async fn representation_io(&mut self, io: Box<RepresentationIo>) -> Step {
        let RepresentationIo {
            object,
            rep_key,
            coding,
            cache_status,
            now,
        } = *io;
        let proxy = self.proxy.clone();
        let chosen = proxy
            .representations
            .lookup_io(&proxy.cache, &proxy.counters, rep_key, &object, coding)
            .await
            .unwrap_or(object);
        self.deliver_chosen(chosen, &cache_status, now)
    }

    /// [`Txn::deliver_object_at`] once the representation sent is chosen.
    fn deliver_chosen(&mut self, object: Arc<Object>, cache_status: &str, now: Instant) -> Step {
        // An MP4 seek on a stored copy: cut up front (`mp4_cut`), so its length is known.
        if self.mp4_start.is_some() && mp4::Mp4::applies(object.status, object.headers.map()) {
            return Step::Mp4Cut(Box::new(Mp4Cut {
                object,
                cache_status: cache_status.to_string(),
                now,
            }));
        }
        super::coding::on_delivery(
            self,
            crate::cache::representation::stored_coding(&object.headers),
        );
        super::coding::identity_for_if_range(self, &object);
        let len = Some(object.body_len);
        self.flv_filter(object.status, object.headers.map(), len);
        // A page stored with an ESI program: assembled (`esi_page.rs`).
        if let Some(program) = self.esi_program(&object)
            && self.esi_wanted()
        {
            return self.deliver_page(object, program, cache_status, now);
        }
        // A policy that answers `If-None-Match` / `If-Modified-Since` itself after Deliver
        // (VCL, on the validators vcl_deliver delivers, as Varnish does): the object's
        // response is built without them.
        if matches!(self.req.method, http::Method::GET | http::Method::HEAD)
            && (has_field(&self.req.headers, &header::IF_NONE_MATCH)
                || has_field(&self.req.headers, &header::IF_MODIFIED_SINCE))
            && self.policy.conditionals_after_deliver(self)
        {
            let mut request = self.req.headers.clone();
            request.remove(header::IF_NONE_MATCH);
            request.remove(header::IF_MODIFIED_SINCE);
            return Step::Deliver(super::filter::object(
                &mut self.filters.deliver,
                object,
                &self.req.method,
                &request,
                self.head_only,
                now,
                cache_status,
            ));
        }
        Step::Deliver(super::filter::object(
            &mut self.filters.deliver,
            object,
            &self.req.method,
            &self.req.headers,
            self.head_only,
            now,
            cache_status,
        ))
    }

    /// After `Step::Mp4Cut`: the MP4 seek cut from the stored copy off the async threads
    /// (`filter/mp4_precut.rs`: its first bytes and `moov` read out of order, from memory or
    /// disk), its filter put on the delivery chain with the answer's length known, so the
    /// response has a `Content-Length` and a `Range` is cut from the answer; nothing to cut,
    /// the file as it is (its Range applied to it); a file that cannot be cut, the same,
    /// logged and counted (`mp4_seek_whole`; `mp4_seek_memory` when the process's bound on
    /// held bytes refused it).
    pub(super) async fn mp4_cut(&mut self, io: Box<Mp4Cut>) -> Step {
        let Mp4Cut {
            object,
            cache_status,
            now,
        } = *io;
        if let Some((span, max)) = self.mp4_start.take() {
            let source = object.clone() as Arc<dyn ReadAt>;
            let mut hold = crate::mp4::held::Hold::new(
                self.proxy.shared.moov_held.clone(),
                self.proxy.config.server.mp4_moov_memory.0,
            );
            let cut = tokio::task::spawn_blocking(move || {
                super::filter::mp4_precut::precut(&*source, span, max, &mut hold)
            })
            .await;
            let counters = &self.proxy.counters;
            let url = self.req.uri.path().to_string();
            match cut {
                Ok(Ok(Some(cut))) => {
                    let filter = mp4::Mp4::new(span, max, counters.clone(), url).with_cut(cut);
                    self.filters.deliver.push(Box::new(filter));
                }
                Ok(Ok(None)) => {}
                Ok(Err(bad)) => {
                    if bad.0 == super::filter::mp4_precut::MEMORY {
                        counters.mp4_seek_memory.inc();
                    }
                    counters.mp4_seek_whole.inc();
                    tracing::warn!(url = %url, reason = bad.0, "mp4 seek: the file is sent whole");
                }
                Err(_) => {
                    counters.mp4_seek_whole.inc();
                    tracing::warn!(url = %url, "mp4 seek: the cut failed; the file is sent whole");
                }
            }
        }
        self.deliver_chosen(object, &cache_status, now)
    }

    /// An FLV or MP4 seek (`flv_start`, `mp4_start`, set by an `flv` or `mp4` rule): the
    /// FLV or MP4 filter on the delivery chain when this response can be cut there
    /// (`filter/flv.rs`, `filter/mp4.rs`); once per request. An MP4 seek on a stored object
    /// was cut up front (`mp4_cut`) and taken there.
    fn flv_filter(&mut self, status: StatusCode, fields: &http::HeaderMap, len: Option<u64>) {
        if let Some(start) = self.flv_start.take()
            && flv::Flv::applies(start, status, fields, len)
        {
            let filter = flv::Flv::new(start).with_length(len);
            self.filters.deliver.push(Box::new(filter));
        }
        if let Some(filter) = self.mp4_filter(status, fields, len) {
            self.filters.deliver.push(Box::new(filter));
        }
    }

    /// The MP4 filter of an MP4 seek whose streamed response can be cut.
    fn mp4_filter(
        &mut self,
        status: StatusCode,
        fields: &http::HeaderMap,
        len: Option<u64>,
    ) -> Option<mp4::Mp4> {
        let (span, max) = self.mp4_start.take()?;
        if !mp4::Mp4::applies(status, fields) {
            return None;
        }
        let url = self.req.uri.path().to_string();
        let hold = crate::mp4::held::Hold::new(
            self.proxy.shared.moov_held.clone(),
            self.proxy.config.server.mp4_moov_memory.0,
        );
        Some(
            mp4::Mp4::new(span, max, self.proxy.counters.clone(), url)
                .with_length(len)
                .with_hold(hold),
        )
    }

    /// Serves a stale object because no backend could answer (`why`).
    pub(super) fn deliver_stale(&mut self, object: Arc<Object>, why: &'static str) -> Step {
        self.proxy.counters.cache_stale_served.inc();
        let status = deliver::stale_status(&object, Instant::now(), why);
        self.deliver_object(object, &status)
    }

    /// Whether a `status` response to this request is cut to its Range (a GET with `Range`
    /// and no `If-Range`, to a 200).
    pub(super) fn ranged(&self, status: StatusCode) -> bool {
        status == StatusCode::OK
            && self.req.method == Method::GET
            && has_field(&self.req.headers, &header::RANGE)
            && !has_field(&self.req.headers, &header::IF_RANGE)
    }

    /// [`ranged`](Self::ranged) for a response whose fields (`headers`, as delivered) are
    /// known: with `If-Range` too when it names that response (its strong `ETag`, or its
    /// `Last-Modified` date; RFC 9110 §13.1.5), as a stored one's is answered. A resumed
    /// download (`Range` with `If-Range`) of a body passed through or streamed from a fill
    /// gets its `206`, not the whole body again.
    pub(super) fn ranged_with(&self, status: StatusCode, headers: &http::HeaderMap) -> bool {
        if !(status == StatusCode::OK
            && self.req.method == Method::GET
            && has_field(&self.req.headers, &header::RANGE))
        {
            return false;
        }
        let etag = headers.get(header::ETAG).and_then(|v| v.to_str().ok());
        let last_modified = headers
            .get(header::LAST_MODIFIED)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v.trim()).ok());
        crate::http::conditional::if_range_holds(&self.req.headers, etag, last_modified)
    }

    /// A streamed response (busy object or backend body) to this request: a single Range is
    /// answered with 206 when the length is known up front; HEAD gets no body.
    pub(super) fn stream_response(
        &mut self,
        status: StatusCode,
        mut headers: http::HeaderMap,
        body: ResponseBody,
        content_length: Option<u64>,
        cache_status: &str,
    ) -> Response<ResponseBody> {
        super::coding::on_delivery(self, super::filter::gzip::coding(&headers));
        self.flv_filter(status, &headers, content_length);
        let page = self.esi_assembly(&mut headers, content_length);
        // The delivery filters (`filter/`), if any: a Range below is cut from their output.
        let (body, content_length) = super::filter::streamed(
            &mut self.filters.deliver,
            status,
            &mut headers,
            body,
            content_length,
        );
        if let Some(answer) = self.withheld_answer(status, &headers, page.is_some()) {
            // A 412 has no body either: the same fields.
            crate::http::conditional::not_modified_fields(&mut headers);
            return deliver::respond(answer, headers, ResponseBody::empty(), cache_status);
        }
        if let (true, Some(len)) = (self.ranged_with(status, &headers), content_length) {
            let range = self
                .req
                .headers
                .get(header::RANGE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            match partial::parse_range(range, len) {
                RangeSpec::Ranges(r) if r.len() == 1 => {
                    let (start, end) = r[0];
                    headers.insert(
                        header::CONTENT_RANGE,
                        deliver::content_range(start, end, len),
                    );
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
                    let body = ResponseBody::slice(body, start, end - start + 1);
                    return deliver::respond(
                        StatusCode::PARTIAL_CONTENT,
                        headers,
                        body,
                        cache_status,
                    );
                }
                RangeSpec::Unsatisfiable => {
                    headers.insert(
                        header::CONTENT_RANGE,
                        HeaderValue::from_str(&format!("bytes */{len}"))
                            .unwrap_or(HeaderValue::from_static("bytes */0")),
                    );
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
                    return deliver::respond(
                        StatusCode::RANGE_NOT_SATISFIABLE,
                        headers,
                        ResponseBody::empty(),
                        cache_status,
                    );
                }
                _ => {}
            }
        }
        // Length unknown until the end (a chunked fill, a body decoded as it streams): one
        // closed range is cut from the bytes as they come, with `Content-Range: bytes a-b/*`
        // (RFC 9110 §14.4: the complete length unknown), as Varnish does (varnishtest
        // g00005); any other Range gets the whole body.
        if let (true, None, None) = (self.ranged_with(status, &headers), content_length, &page)
            && let Some((start, end)) = closed_range(self.req.headers.get(header::RANGE))
            && let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/*"))
        {
            headers.insert(header::CONTENT_RANGE, v);
            headers.remove(header::CONTENT_LENGTH);
            headers.remove(header::ACCEPT_RANGES);
            let body = ResponseBody::slice(body, start, end - start + 1);
            return deliver::respond(StatusCode::PARTIAL_CONTENT, headers, body, cache_status);
        }
        let body = if self.head_only {
            ResponseBody::empty()
        } else {
            body
        };
        let mut resp = deliver::respond(status, headers, body, cache_status);
        if let Some(page) = page {
            resp = self.page_range(resp);
            resp.extensions_mut().insert(esi::Prime(page));
        }
        resp
    }

    /// A response fetched with ESI on whose program is not known yet (`esi::PENDING`): the
    /// assembly filter that parses and assembles it here, on the delivery chain, and the page
    /// it assembles (`None`: no ESI, or the client does not get it assembled).
    fn esi_assembly(
        &mut self,
        headers: &mut http::HeaderMap,
        content_length: Option<u64>,
    ) -> Option<Arc<esi::Page>> {
        // Its value marks a page that goes out gzip (`esi::stored::GZIP`).
        let gzip = headers.get(esi::FIELD).is_some_and(|v| {
            v.as_bytes()
                .starts_with(crate::esi::stored::GZIP.as_bytes())
        });
        if headers.remove(esi::FIELD).is_some() && self.esi_wanted() && !self.head_only {
            // The body's length, if it is the identity bytes the assembly reads.
            let identity_len = content_length.filter(|_| {
                super::filter::gzip::coding(headers)
                    == Some(crate::http::accept_encoding::Coding::Identity)
            });
            let p = esi::Page::new(self.proxy.clone(), &self.req, self.client, self.vcl_time());
            // VCL's deliver step reads whether it is an ESI page (`obj.can_esi`): it waits
            // for the parse's answer (`esi::settle`).
            if self.vcl.is_some() {
                p.hold.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let url = self.req.uri.path_and_query().map_or("/", |p| p.as_str());
            self.filters
                .deliver
                .push(Box::new(esi::Assemble::parse(p.clone(), url, identity_len)));
            self.esi_coding(gzip);
            return Some(p);
        }
        None
    }

    /// The answer to the preconditions the backend never saw (`withheld_conditions`), on the
    /// `200` being delivered with `headers`: 304 or 412 (RFC 9110 §13.2.2, in its order),
    /// or `None` to deliver it. The 200 answers the request without its conditions, so its
    /// validators are the selected representation's: asked the conditional request, the
    /// origin would have answered this (Varnish evaluates them on every 200 it delivers;
    /// nginx only on responses it caches, which leaves a `no-store` 200 to a matching
    /// `If-None-Match` whole). A policy that answers them after its own deliver step (VCL,
    /// after vcl_deliver) is left to do so; an assembled ESI page has no validators.
    fn withheld_answer(
        &mut self,
        status: StatusCode,
        headers: &http::HeaderMap,
        assembled: bool,
    ) -> Option<StatusCode> {
        if !self.withheld_conditions
            || status != StatusCode::OK
            || assembled
            || !matches!(self.req.method, Method::GET | Method::HEAD)
            || self.policy.conditionals_after_deliver(self)
        {
            return None;
        }
        let etag = headers.get(header::ETAG).and_then(|v| v.to_str().ok());
        let last_modified = headers
            .get(header::LAST_MODIFIED)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v.trim()).ok());
        let mut request = self.req.headers.clone();
        request.remove(header::RANGE);
        request.remove(header::IF_RANGE);
        match crate::http::conditional::evaluate(&self.req.method, &request, etag, last_modified, 0)
        {
            partial::Answer::NotModified => Some(StatusCode::NOT_MODIFIED),
            partial::Answer::PreconditionFailed => Some(StatusCode::PRECONDITION_FAILED),
            _ => None,
        }
    }
}

/// Whether a request carries a precondition a cache can answer (RFC 9110 §13.1).
pub(super) fn has_preconditions(request: &http::HeaderMap) -> bool {
    [
        header::IF_NONE_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_MATCH,
        header::IF_UNMODIFIED_SINCE,
    ]
    .iter()
    .any(|name| request.contains_key(name))
}

/// A `Range` of one closed range (`bytes=a-b`, `a <= b`): what can be cut from a body whose
/// length is not known yet.
pub(super) fn closed_range(value: Option<&HeaderValue>) -> Option<(u64, u64)> {
    let spec = value?.to_str().ok()?.trim();
    let (unit, set) = spec.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return None;
    }
    let (a, b) = set.trim().split_once('-')?;
    let digits = |t: &str| {
        let t = t.trim();
        (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
            .then(|| t.parse::<u64>().ok())
            .flatten()
    };
    let (start, end) = (digits(a)?, digits(b)?);
    (start <= end).then_some((start, end))
}

#[cfg(test)]
mod range_tests {
    use super::*;

    #[test]
    fn only_one_closed_range_is_cut_from_a_body_of_unknown_length() {
        let r = |v: &str| closed_range(Some(&HeaderValue::from_str(v).unwrap()));
        assert_eq!(r("bytes=3-5"), Some((3, 5)));
        assert_eq!(r("bytes = 0-0"), Some((0, 0)));
        assert_eq!(r("bytes=3-"), None);
        assert_eq!(r("bytes=-5"), None);
        assert_eq!(r("bytes=5-3"), None);
        assert_eq!(r("bytes=0-1,4-5"), None);
        assert_eq!(r("items=0-1"), None);
        assert_eq!(closed_range(None), None);
    }
}
