//! A client response from slices (`Step::Slices`, `Step::SliceProbe`): the request's
//! preconditions and Range against the representation's validators and length, the first slice
//! it needs had before the head goes out (so a changed representation restarts the request
//! instead of cutting it), then the rest read slice after slice by a task as the client reads.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::acquire::{Source, acquire, stored_from};
use super::{Ctx, DETAIL, Failure};
use crate::cache::partial::content_range;
use crate::cache::policy::{self, Overrides};
use crate::cache::slices::SliceMeta;
use crate::http::conditional::{self, Answer};
use crate::proxy::body::ResponseBody;
use crate::proxy::chunks::{Chunks, FilterError};
use crate::proxy::deliver;
use crate::proxy::txn::{Step, Txn};

/// Chunks the streaming task may be ahead of the client (each at most 256 KiB).
const AHEAD: usize = 8;

impl Txn {
    /// Answers the request from the slices of `meta`.
    pub(in crate::proxy) async fn slices(&mut self, meta: Arc<SliceMeta>) -> Step {
        self.sliced(meta, None).await
    }

    /// A Range starting past `max_object_size` of a URL not known yet: the slice holding its
    /// first byte is asked; its `Content-Range` gives the length, and the URL is sliced from
    /// then on (that slice stored and used). Anything else is passed through.
    pub(in crate::proxy) async fn slice_probe(&mut self, start: u64) -> Step {
        let Some(requester) = self.slice_requester() else {
            return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "no-healthy-backend");
        };
        let size = self.proxy.config.cache.slice_size.0;
        let index = start / size;
        let first = index * size;
        self.proxy.counters.slice_fetch.inc();
        let resp = match requester.send(first, first + size - 1).await {
            Ok(resp) => resp,
            Err((status, detail)) => return Step::Synth(status, detail),
        };
        let request_time = std::time::SystemTime::now();
        let learnt = content_range(resp.headers()).and_then(|(a, b, length)| {
            let whole = a == first && b == (first + size).min(length) - 1;
            let exchange = policy::Exchange {
                partial_content: true,
                ..policy::Exchange::at(request_time, request_time)
            };
            let plan = policy::evaluate_with(
                resp.status(),
                resp.headers(),
                &exchange,
                self.cache_config(),
                &Overrides::default(),
            )
            .ok()?;
            (whole && resp.status() == StatusCode::PARTIAL_CONTENT)
                .then(|| super::learn(self, resp.headers(), length, &plan))
                .filter(|learnt| *learnt)
        });
        let meta = match (learnt, &self.key) {
            (Some(_), Some(primary)) => self.proxy.cache.slices.get(primary),
            _ => None,
        };
        let Some(meta) = meta else {
            self.proxy.counters.cache_miss.inc();
            if resp.status() == StatusCode::OK {
                self.proxy.counters.slice_range_ignored.inc();
                if let Some(primary) = &self.key {
                    let ttl = self.proxy.config.cache.hit_for_miss_ttl.0;
                    self.proxy.cache.slices.refuse(primary, ttl);
                }
            }
            let (parts, body) = resp.into_parts();
            return self.pass_through(parts, body, "detail=slice-probe");
        };
        let Some(ctx) = self.slice_ctx(meta.clone(), requester) else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        // The probe is slice `index` of what was just learnt: stored and followed like any.
        let key = meta.key(&ctx.primary, index);
        let guard = match self.proxy.cache.busy.join(&key) {
            crate::cache::busy::Join::Leader(guard) => guard,
            crate::cache::busy::Join::Waiter(_) => {
                return self.sliced(meta, None).await;
            }
        };
        match stored_from(&ctx, meta.bounds(index), key, guard, resp) {
            Ok(source) => self.sliced_with(ctx, Some((index, source))).await,
            Err(failure) => self.slice_failure(failure),
        }
    }

    fn slice_ctx(&self, meta: Arc<SliceMeta>, requester: super::Requester) -> Option<Ctx> {
        Some(Ctx {
            proxy: self.proxy.clone(),
            primary: self.key.clone()?,
            meta,
            requester,
            req_headers: self.req.headers.clone(),
        })
    }

    async fn sliced(&mut self, meta: Arc<SliceMeta>, first: Option<(u64, Source)>) -> Step {
        let Some(requester) = self.slice_requester() else {
            return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "no-healthy-backend");
        };
        let Some(ctx) = self.slice_ctx(meta, requester) else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        self.sliced_with(ctx, first).await
    }

    async fn sliced_with(&mut self, ctx: Ctx, first: Option<(u64, Source)>) -> Step {
        let meta = ctx.meta.clone();
        let etag = meta.fields.get(header::ETAG).and_then(|v| v.to_str().ok());
        let last_modified = meta
            .fields
            .get(header::LAST_MODIFIED)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v.trim()).ok());
        let whole = (0, meta.length - 1);
        let method = if self.head_only {
            Method::HEAD
        } else {
            Method::GET
        };
        let (status, (start, end)) = match conditional::evaluate(
            &method,
            &self.req.headers,
            etag,
            last_modified,
            meta.length,
        ) {
            Answer::Full => (StatusCode::OK, whole),
            Answer::Partial(r) if r.len() == 1 => (StatusCode::PARTIAL_CONTENT, r[0]),
            // Several ranges of a big object: the whole representation (RFC 9110 §14.2).
            Answer::Partial(_) => (StatusCode::OK, whole),
            Answer::NotModified => return self.slice_head(&meta, StatusCode::NOT_MODIFIED),
            Answer::PreconditionFailed => {
                return Step::Synth(StatusCode::PRECONDITION_FAILED, "precondition-failed");
            }
            Answer::Unsatisfiable => {
                return self.slice_head(&meta, StatusCode::RANGE_NOT_SATISFIABLE);
            }
        };
        let size = meta.slice_size;
        let index = start / size;
        let source = match first {
            Some((i, source)) if i == index => Ok(source),
            _ => acquire(&ctx, index).await,
        };
        let source = match source {
            Ok(source) => source,
            Err(failure) => return self.slice_failure(failure),
        };
        let counters = &self.proxy.counters;
        counters.slice_responses.inc();
        let hit = source.is_hit();
        if hit {
            counters.cache_hit.inc();
        } else {
            counters.cache_miss.inc();
        }
        let (fields, age) = source.fields(Instant::now());
        let mut headers = super::fields(&fields);
        headers.insert(header::AGE, HeaderValue::from(age));
        headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
        if status == StatusCode::PARTIAL_CONTENT {
            headers.insert(
                header::CONTENT_RANGE,
                deliver::content_range(start, end, meta.length),
            );
        }
        let cache_status = if hit {
            format!("shellac; hit; {DETAIL}")
        } else {
            format!("shellac; fwd=miss; {DETAIL}")
        };
        let body = if self.head_only {
            ResponseBody::empty()
        } else {
            let skip = start - index * size;
            let take = (end - start + 1).min(size - skip);
            let first = source.body(skip, take);
            let (tx, rx) = mpsc::channel(AHEAD);
            tokio::spawn(pump(ctx, first, (index + 1, start + take, end), tx));
            ResponseBody::filtered(Receiver(rx))
        };
        Step::Deliver(deliver::respond(status, headers, body, &cache_status))
    }

    /// A 304 or 416 from what is known of the representation.
    fn slice_head(&mut self, meta: &SliceMeta, status: StatusCode) -> Step {
        self.proxy.counters.slice_responses.inc();
        self.proxy.counters.cache_hit.inc();
        let mut headers = HeaderMap::new();
        if status == StatusCode::NOT_MODIFIED {
            for name in [
                header::ETAG,
                header::LAST_MODIFIED,
                header::CACHE_CONTROL,
                header::EXPIRES,
                header::CONTENT_LOCATION,
                header::DATE,
            ] {
                if let Some(v) = meta.fields.get(&name) {
                    headers.insert(name, v.clone());
                }
            }
        } else if let Ok(v) = HeaderValue::from_str(&format!("bytes */{}", meta.length)) {
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
    fn slice_failure(&mut self, failure: Failure) -> Step {
        match failure {
            Failure::Changed => Step::Lookup,
            Failure::Ignored(resp) => {
                let (parts, body) = *resp;
                self.pass_through(parts, body, "detail=slice-range-ignored")
            }
            Failure::Answer(resp) => {
                let (parts, body) = *resp;
                self.pass_through(parts, body, "detail=slice")
            }
            Failure::Failed(status, detail) => Step::Synth(status, detail),
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

/// Streams the first slice's bytes, then slices `next ..` up to byte `end`, into `tx`. A slice
/// that cannot be had (another version, the origin's refusal, a failure) ends the body with an
/// error: the client's connection is cut, never given bytes of two versions.
async fn pump(
    ctx: Ctx,
    mut body: ResponseBody,
    (mut index, mut at, end): (u64, u64, u64),
    tx: mpsc::Sender<Result<Bytes, FilterError>>,
) {
    loop {
        while let Some(frame) = body.frame().await {
            let data = match frame {
                Ok(frame) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue,
                },
                Err(e) => {
                    let _ = tx.send(Err(Box::new(e))).await;
                    return;
                }
            };
            if tx.send(Ok(data)).await.is_err() {
                // The client went away.
                return;
            }
        }
        if at > end {
            return;
        }
        let source = match acquire(&ctx, index).await {
            Ok(source) => source,
            Err(failure) => {
                let why = match failure {
                    Failure::Changed => "the representation changed",
                    Failure::Ignored(..) => "the origin ignored a slice's Range",
                    Failure::Answer(..) => "the origin refused a slice",
                    Failure::Failed(_, detail) => detail,
                };
                tracing::info!(key = %ctx.primary, index, why, "sliced response cut");
                let _ = tx.send(Err(why.into())).await;
                return;
            }
        };
        let take = (end - at + 1).min(ctx.meta.slice_size);
        body = source.body(0, take);
        at += take;
        index += 1;
    }
}

/// The client's side of the pump.
struct Receiver(mpsc::Receiver<Result<Bytes, FilterError>>);

impl Chunks for Receiver {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        self.0.poll_recv(cx)
    }
}
