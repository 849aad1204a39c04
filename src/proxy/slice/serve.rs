//! A client response from slices (`Step::Slices`, `Step::SliceProbe`): the request's
//! preconditions and Range against the representation's validators and length, the first slice
//! it needs had before the head goes out (so a changed representation restarts the request
//! instead of cutting it), then the rest read slice after slice by a task as the client reads.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

use super::acquire::{SliceSource, acquire, peek, stored_from};
use super::backend::Fetched;
use super::seek::Read;
use super::{Ctx, DETAIL, SliceFailure, pump};
use crate::cache::partial::content_range;
use crate::cache::policy;
use crate::cache::slices::SliceMeta;
use crate::http::conditional::{self, Answer};
use crate::proxy::body::ResponseBody;
use crate::proxy::deliver;
use crate::proxy::policy::{ErrorOutcome, ResponseOutcome};
use crate::proxy::txn::{FetchMode, Step, Txn};

/// Backend requests a probe sends at most (the policy's retries included).
const PROBE_TRIES: usize = 4;

impl Txn {
    /// Answers the request from the slices of `meta`, after the policy's hit or miss step
    /// for its first slice and its backend-request step (`Policy::slices`).
    pub(in crate::proxy) async fn slices(&mut self, meta: Arc<SliceMeta>) -> Step {
        self.sliced(meta, true).await
    }

    /// A Range starting past `max_object_size` of a URL not known yet: the slice holding its
    /// first byte is asked (after the policy's miss and backend-request steps; its answer
    /// through the policy's backend-response step); its `Content-Range` gives the length,
    /// and the URL is sliced from then on (that slice stored and used) with the lifetimes
    /// the policy's storage decision gives it. Anything else is passed through.
    pub(in crate::proxy) async fn slice_probe(&mut self, start: u64) -> Step {
        if let Some(step) = self.policy.slices(self, None) {
            return step;
        }
        let size = self.proxy.config.cache.slice_size.0;
        let index = start / size;
        let first = index * size;
        let mut tries = 0;
        let (parts, body, storage, exchange) = loop {
            tries += 1;
            if tries > PROBE_TRIES {
                return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "too-many-retries");
            }
            let Some(requester) = self.slice_requester() else {
                return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "no-healthy-backend");
            };
            self.proxy.counters.slice_fetch.inc();
            let request_time = SystemTime::now();
            let resp = match requester.send(first, first + size - 1).await {
                Ok(resp) => resp,
                Err((status, detail)) => match self.policy.backend_error(self, status, detail) {
                    Some(ErrorOutcome::Retry) => continue,
                    Some(ErrorOutcome::Step(step)) => return step,
                    // Nothing is stored whole on the sliced path: the answer as made.
                    Some(ErrorOutcome::Store(made)) => return made.instead,
                    None => return Step::Synth(status, detail),
                },
            };
            let (mut parts, body) = resp.into_parts();
            // Shellac's own fields: a backend never sets them (as `fetch/exchange.rs`).
            parts.headers.remove(crate::proxy::filter::esi::FIELD);
            parts.headers.remove(crate::cache::identity::FIELD);
            parts.headers.remove(crate::cache::status_line::FIELD);
            let exchange = policy::Exchange {
                partial_content: true,
                ..policy::Exchange::at(request_time, SystemTime::now())
            };
            let mode = FetchMode::Alone("slice-probe");
            match self
                .policy
                .backend_response(self, &mut parts, &exchange, &mode, false)
            {
                ResponseOutcome::Store { storage, .. } => {
                    break (parts, body, storage, exchange);
                }
                ResponseOutcome::Retry => continue,
                ResponseOutcome::Step(step) => return step,
                // A probe stores nothing: delivered as made.
                ResponseOutcome::Made(made) => return made.instead,
            }
        };
        let plan = storage.plan(parts.status, &parts.headers, &exchange, self.cache_config());
        let learnt = content_range(&parts.headers).and_then(|(a, b, length)| {
            let whole = a == first && b == (first + size).min(length) - 1;
            let plan = plan.as_ref().ok()?;
            (whole && parts.status == StatusCode::PARTIAL_CONTENT)
                .then(|| super::learn(self, &parts.headers, length, plan))
                .filter(|learnt| *learnt)
        });
        let meta = match (learnt, &self.key) {
            (Some(_), Some(primary)) => self.proxy.cache.slices.get(primary),
            _ => None,
        };
        let Some(meta) = meta else {
            self.proxy.counters.cache_miss.inc();
            if parts.status == StatusCode::OK {
                self.proxy.counters.slice_range_ignored.inc();
                if let Some(primary) = &self.key {
                    let ttl = self.proxy.config.cache.hit_for_miss_ttl.0;
                    self.proxy.cache.slices.refuse(primary, ttl);
                }
            }
            return self.pass_through(parts, body, "detail=slice-probe");
        };
        let Some(ctx) = self.slice_ctx(meta.clone()) else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        // The probe is slice `index` of what was just learnt: stored and followed like any.
        let key = meta.key(&ctx.primary, index);
        let guard = match self.proxy.cache.busy.join(&key) {
            crate::cache::busy::Join::Leader(guard) => guard,
            crate::cache::busy::Join::Waiter(_) => {
                return self.sliced(meta, false).await;
            }
        };
        let fetched = Fetched { parts, body, plan };
        match stored_from(&ctx, meta.bounds(index), key, guard, fetched) {
            Ok(source) => match self.slice_answer(&meta) {
                Ok((status, range)) => {
                    self.sliced_with(ctx, status, range, Some((index, source)))
                        .await
                }
                Err(step) => *step,
            },
            Err(failure) => self.slice_failure(failure),
        }
    }

    fn slice_ctx(&self, meta: Arc<SliceMeta>) -> Option<Ctx> {
        Some(Ctx {
            proxy: self.proxy.clone(),
            primary: self.key.clone()?,
            meta,
            req: crate::proxy::backend_side::get_head(&self.req),
            client: self.client,
            inherited: self.inherited(),
            req_headers: self.req.headers.clone(),
            seek: None,
        })
    }

    /// The response from slices; `hooks`: the policy's steps are still to run (not after a
    /// probe, which ran them).
    async fn sliced(&mut self, meta: Arc<SliceMeta>, hooks: bool) -> Step {
        let (status, range) = match self.slice_answer(&meta) {
            Ok(answer) => answer,
            Err(step) => return *step,
        };
        let index = range.0 / meta.slice_size;
        let mut first = None;
        if hooks {
            let Some(primary) = self.key.clone() else {
                return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
            };
            let stored = peek(&self.proxy, (&primary, &meta), &self.req.headers, index).await;
            // The policy's hit (the first slice is stored) or miss step; each slice this
            // response fetches runs the backend steps in a transaction of its own.
            if let Some(step) = self.policy.slice_lookup(self, stored.as_ref()) {
                return step;
            }
            if let Some(object) = stored {
                self.proxy.counters.slice_hit.inc();
                first = Some((index, SliceSource::Stored(object)));
            }
        }
        let Some(ctx) = self.slice_ctx(meta) else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        self.sliced_with(ctx, status, range, first).await
    }

    /// The request's preconditions and Range against the representation: the status and the
    /// bytes to send, or the step that answers without any slice (304, 412, 416).
    pub(super) fn slice_answer(
        &mut self,
        meta: &SliceMeta,
    ) -> Result<(StatusCode, (u64, u64)), Box<Step>> {
        // A seek's answer is a file of its own: its preconditions here, its Range against it
        // once cut (`cut_answer`).
        let plain;
        let request = if self.slice_seek().is_some() {
            let mut h = self.req.headers.clone();
            h.remove(header::RANGE);
            h.remove(header::IF_RANGE);
            plain = h;
            &plain
        } else {
            &self.req.headers
        };
        let etag = meta.fields.get(header::ETAG).and_then(|v| v.to_str().ok());
        let last_modified = last_modified(meta);
        let whole = (0, meta.length - 1);
        let method = if self.head_only {
            Method::HEAD
        } else {
            Method::GET
        };
        match conditional::evaluate(&method, request, etag, last_modified, meta.length) {
            Answer::Full => Ok((StatusCode::OK, whole)),
            Answer::Partial(r) if r.len() == 1 => Ok((StatusCode::PARTIAL_CONTENT, r[0])),
            // Several ranges of a big object: the whole representation (RFC 9110 §14.2).
            Answer::Partial(_) => Ok((StatusCode::OK, whole)),
            Answer::NotModified => Err(Box::new(self.slice_head(
                meta,
                StatusCode::NOT_MODIFIED,
                meta.length,
            ))),
            Answer::PreconditionFailed => Err(Box::new(Step::Synth(
                StatusCode::PRECONDITION_FAILED,
                "precondition-failed",
            ))),
            Answer::Unsatisfiable => Err(Box::new(self.slice_head(
                meta,
                StatusCode::RANGE_NOT_SATISFIABLE,
                meta.length,
            ))),
        }
    }

    /// The response from slices `start ..= end`; a seek asked and not made yet is made first
    /// (`sliced_seek`).
    async fn sliced_with(
        &mut self,
        ctx: Ctx,
        status: StatusCode,
        (start, end): (u64, u64),
        first: Option<(u64, SliceSource)>,
    ) -> Step {
        if let (StatusCode::OK, Some(wanted)) = (status, self.slice_seek()) {
            // Boxed: rare, and inline it would grow every sliced response's future.
            let seek = self.sliced_seek(ctx, wanted, first);
            return Box::pin(seek).await;
        }
        let out = Out {
            status,
            prefix: None,
            data: Some((start, end)),
            range: (status == StatusCode::PARTIAL_CONTENT).then_some((start, end, ctx.meta.length)),
            cut: false,
            read: None,
        };
        self.send(ctx, out, first).await
    }

    /// Sends `out`: the slice holding its first byte of data is had before the head goes out
    /// (`first` when it is that one) — except for a HEAD, which reads no slice of data: a
    /// seek's has its head from what the cut read, a plain one from the stored first slice or
    /// one byte asked of the origin (`head.rs`). `Cache-Status` says `hit` when every slice
    /// had before the head was stored (the first slice of a plain response; a seek's `moov`
    /// slices and its first data slice), `fwd=miss` when any was not (or a byte was asked).
    pub(super) async fn send(
        &mut self,
        ctx: Ctx,
        out: Out,
        first: Option<(u64, SliceSource)>,
    ) -> Step {
        let Out {
            status,
            prefix,
            data,
            range,
            cut,
            mut read,
        } = out;
        let size = ctx.meta.slice_size;
        // A plain HEAD reads no slice: the fields of the stored first slice, else one byte
        // asked (`head.rs`).
        let mut asked = None;
        let source = match data {
            Some((start, _)) if self.head_only && read.is_none() => match first {
                Some((i, source)) if i == start / size => Some(source),
                _ => match super::head::fields_asked(&ctx, start).await {
                    Ok(fields) => {
                        asked = Some(fields);
                        None
                    }
                    Err(failure) => return self.slice_failure(failure),
                },
            },
            Some((start, _)) if !self.head_only => {
                let index = start / size;
                let source = match first {
                    Some((i, source)) if i == index => Ok(source),
                    _ => acquire(&ctx, index).await,
                };
                match source {
                    Ok(source) => {
                        ctx.count_seek_slice(index);
                        Some(source)
                    }
                    Err(failure) => return self.slice_failure(failure),
                }
            }
            _ => None,
        };
        let counters = &self.proxy.counters;
        counters.slice_responses.inc();
        let missed = read.as_ref().is_some_and(|r| r.missed);
        let hit = !missed && asked.is_none() && source.as_ref().is_none_or(SliceSource::is_hit);
        if hit {
            counters.cache_hit.inc();
        } else {
            counters.cache_miss.inc();
        }
        let known = asked
            .map(|fields| {
                let age = crate::cache::policy::age_field(&fields).map_or(0, |a| a.as_secs());
                (fields, age)
            })
            .or_else(|| read.as_mut().and_then(|r| r.fields.take()));
        let (fields, age) = match (&source, known) {
            (Some(source), _) => {
                let (fields, age) = source.fields(Instant::now());
                (fields, Some(age))
            }
            (None, Some((fields, age))) => (fields, Some(age)),
            // No slice read (an FLV seek's HEAD): what is known of the representation.
            (None, None) => (ctx.meta.fields.clone(), None),
        };
        let mut headers = super::fields(&fields);
        if let Some(age) = age {
            headers.insert(header::AGE, HeaderValue::from(age));
        }
        headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        let before = prefix.as_ref().map_or(0, |p| p.len() as u64);
        let after = data.map_or(0, |(start, end)| end - start + 1);
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(before + after));
        if cut {
            // Another file than the representation's bytes: not named by the strong ETag.
            crate::proxy::filter::weaken_etag(&mut headers);
        }
        if let Some((a, b, length)) = range {
            headers.insert(header::CONTENT_RANGE, deliver::content_range(a, b, length));
        }
        let cache_status = if hit {
            format!("shellac; hit; {DETAIL}")
        } else {
            format!("shellac; fwd=miss; {DETAIL}")
        };
        let body = if self.head_only {
            ResponseBody::empty()
        } else {
            let first = match (source, data) {
                (Some(source), Some((start, end))) => {
                    let index = start / size;
                    let skip = start - index * size;
                    let take = (end - start + 1).min(size - skip);
                    Some((source.body(skip, take), (index + 1, start + take, end)))
                }
                _ => None,
            };
            pump::stream(ctx, prefix, first)
        };
        Step::Deliver(deliver::respond(status, headers, body, &cache_status))
    }

    /// A 304, or a 416 for an answer of `length` bytes, from what is known of the
    /// representation.
    pub(super) fn slice_head(&mut self, meta: &SliceMeta, status: StatusCode, length: u64) -> Step {
        self.proxy.counters.slice_responses.inc();
        self.proxy.counters.cache_hit.inc();
        let mut headers = HeaderMap::new();
        if status == StatusCode::NOT_MODIFIED {
            headers.clone_from(&meta.fields);
            crate::http::conditional::not_modified_fields(&mut headers);
        } else if let Ok(v) = HeaderValue::from_str(&format!("bytes */{length}")) {
            headers.insert(header::CONTENT_RANGE, v);
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
        }
        let cache_status = format!("shellac; hit; {DETAIL}");
        Step::Deliver(deliver::respond(
            status,
            headers,
            ResponseBody::empty(),
            &cache_status,
        ))
    }

    /// The first slice could not be had: the request looks up again after an invalidation
    /// (the usual path fetches the new version), a response the origin gave is passed
    /// through, a failure is answered.
    pub(super) fn slice_failure(&mut self, failure: SliceFailure) -> Step {
        match failure {
            SliceFailure::Changed => Step::Lookup,
            SliceFailure::Ignored(resp) => {
                let (parts, body) = *resp;
                self.pass_through(parts, body, "detail=slice-range-ignored")
            }
            SliceFailure::Answer(resp) => {
                let (parts, body) = *resp;
                self.pass_through(parts, body, "detail=slice")
            }
            SliceFailure::Failed(status, detail) => Step::Synth(status, detail),
        }
    }

    fn pass_through(
        &mut self,
        parts: http::response::Parts,
        body: crate::backend::BackendBody,
        detail: &str,
    ) -> Step {
        let length = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let status = format!("shellac; fwd=miss; {detail}");
        Step::Deliver(self.stream_response(
            parts.status,
            parts.headers,
            ResponseBody::backend(body),
            length,
            &status,
        ))
    }
}

/// The file's `Last-Modified`, as a time.
pub(super) fn last_modified(meta: &SliceMeta) -> Option<SystemTime> {
    meta.fields
        .get(header::LAST_MODIFIED)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v.trim()).ok())
}

/// What a response from slices sends (`Txn::send`).
pub(super) struct Out {
    pub(super) status: StatusCode,
    /// Bytes before the representation's (a seek's head, or the part of it a Range asks).
    pub(super) prefix: Option<Bytes>,
    /// The representation's bytes `start ..= end` to send, if any.
    pub(super) data: Option<(u64, u64)>,
    /// A 206's `Content-Range`: first, last, complete length.
    pub(super) range: Option<(u64, u64, u64)>,
    /// A seek's cut answer (its `ETag` weakened).
    pub(super) cut: bool,
    /// What a seek's cut read before the head (`None`: not a seek).
    pub(super) read: Option<Box<Read>>,
}
