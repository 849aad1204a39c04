//! The exchange with the backend: the request sent (`send.rs`), a failure answered (the
//! policy's `backend_error`, else the stale copy or the error), a 304 whose copy went meanwhile
//! fetched again (the policy's `stale_gone`), and the response head handed to the policy
//! (`backend_response`), which may retry, answer itself, or say how it is stored.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};
use http::response::Parts;

use super::super::combine;
use super::super::policy::{ErrorOutcome, Instead, MadeAnswer, ResponseOutcome, Storage};
use super::super::txn::{FetchMode, Step, Txn};
use super::send::{self, SendFailure};
use crate::backend::BackendBody;
use crate::cache::policy;
use crate::cache::shared::feed::Position;
use crate::http::accept_encoding::Coding;

/// When the exchange happened, and where the fleet's invalidation log stood.
pub(super) struct Clock {
    /// When the backend request was sent, and its response head arrived (wall clock).
    pub request_time: SystemTime,
    pub response_time: SystemTime,
    /// When the response head arrived (monotonic): the stored object's birth.
    pub stored_at: Instant,
    /// Where this node stood in the fleet's invalidation log before asking the origin.
    pub seen: Position,
}

/// A backend response head, as the policy left it, with what the fetch needs to store it.
pub(super) struct Exchanged {
    pub clock: Clock,
    pub parts: Parts,
    pub body: BackendBody,
    /// The policy's storage decision, to be made (`Storage::decide`).
    pub storage: Storage,
    /// A 304 revalidating the stale copy.
    pub was_304: bool,
}

impl Exchanged {
    /// The times a piece of partial content is stored with (`combine.rs`).
    pub(super) fn times(&self) -> combine::Times {
        combine::Times {
            request: self.clock.request_time,
            response: self.clock.response_time,
            received: self.clock.stored_at,
        }
    }
}

/// The exchange with the backend, again as long as the policy says `retry` (VCL: bounded by
/// `[vcl] max_retries`): the response head as the policy left it, or the step the fetch ends in (an
/// error answered, a stale copy served, the policy's own answer).
pub(super) async fn exchange(
    txn: &mut Txn,
    mode: &FetchMode,
    for_cache: bool,
) -> ControlFlow<Step, Exchanged> {
    loop {
        let request_time = SystemTime::now();
        let seen = fleet_position(txn);
        let resp = match send::send(txn, for_cache).await {
            Ok(resp) => resp,
            Err(failure) => match answer_failure(txn, mode, failure) {
                ControlFlow::Continue(None) => match refetch(txn, mode, for_cache) {
                    None => continue,
                    Some(done) => return done,
                },
                ControlFlow::Continue(Some(made)) => {
                    return ControlFlow::Continue(made_exchange(txn, *made, request_time, seen));
                }
                ControlFlow::Break(step) => return ControlFlow::Break(step),
            },
        };
        let response_time = SystemTime::now();
        let stored_at = Instant::now();
        let (mut parts, mut body) = resp.into_parts();
        take_own_fields(txn, &mut parts.headers);
        // A 304 answering the revalidation of a stale copy (`send` made the request
        // conditional on it).
        let was_304 = for_cache && parts.status == StatusCode::NOT_MODIFIED && txn.stale.is_some();
        if was_304 && !still_stored(txn).await {
            match revalidated_gone(txn, mode, body) {
                ControlFlow::Continue(()) => continue,
                ControlFlow::Break(step) => return ControlFlow::Break(step),
            }
        }
        // A 206 to a Range the cache asked for itself (partial content, big media) is stored
        // as what it is: bytes of the representation (the policy's lifetimes are its).
        let ex = policy::Exchange {
            partial_content: matches!(mode, FetchMode::Range(_) | FetchMode::Complete(..)),
            ..policy::Exchange::at(request_time, response_time)
        };
        let storage = match txn
            .policy
            .backend_response(txn, &mut parts, &ex, mode, was_304)
        {
            ResponseOutcome::Store { storage, buffer } => {
                let read_whole = buffer && !was_304;
                if let Err(step) = ready_body(txn, mode, &mut parts, &mut body, read_whole).await {
                    return ControlFlow::Break(step);
                }
                storage
            }
            // The response is not used: its body, when small and already on its way, is
            // read to its end so its connection is reused (`BackendBody::drain`), before
            // the next fetch looks for one.
            ResponseOutcome::Retry => {
                body.drain().await;
                match refetch(txn, mode, for_cache) {
                    None => continue,
                    Some(done) => return done,
                }
            }
            ResponseOutcome::Step(step) => {
                body.drain().await;
                leave(mode);
                return ControlFlow::Break(step);
            }
            // vcl_backend_error's object stored in the response's place; the backend's body
            // is not used, as on a `Step`.
            ResponseOutcome::Made(made) => {
                body.drain().await;
                return ControlFlow::Continue(made_exchange(txn, *made, request_time, seen));
            }
        };
        return ControlFlow::Continue(Exchanged {
            clock: Clock {
                request_time,
                response_time,
                stored_at,
                seen,
            },
            parts,
            body,
            storage,
            was_304,
        });
    }
}

/// A retry the policy asked for (VCL's `return (retry)`): the fetch starts over as Varnish's
/// does — vcl_backend_fetch runs again on the backend request as it was left (a
/// `bereq.backend` vcl_backend_response set stays) and routes it anew. `Some` when it does
/// not fetch: the step the fetch ends in, or the answer it made, stored in the response's
/// place.
fn refetch(
    txn: &mut Txn,
    mode: &FetchMode,
    for_cache: bool,
) -> Option<ControlFlow<Step, Exchanged>> {
    Some(match txn.policy.backend_fetch(txn, for_cache)? {
        Instead::Step(step) => {
            leave(mode);
            ControlFlow::Break(step)
        }
        Instead::Made(made) => ControlFlow::Continue(made_now(txn, *made)),
    })
}

/// An answer the policy made before any backend was asked (VCL: vcl_backend_fetch's
/// `return (error(...))` into a vcl_backend_error object with a lifetime), as an exchange
/// happening now.
pub(super) fn made_now(txn: &Txn, made: MadeAnswer) -> Exchanged {
    let seen = fleet_position(txn);
    made_exchange(txn, made, SystemTime::now(), seen)
}

/// Where this node stood in the fleet's invalidation log before asking the origin.
fn fleet_position(txn: &Txn) -> Position {
    txn.proxy
        .cache
        .shared
        .as_ref()
        .map(|s| s.feed.position())
        .unwrap_or_default()
}

/// The answer the policy made instead of a response, to be stored (vcl_backend_error's
/// object with a lifetime): the exchange as if the backend had sent it, its body whole.
fn made_exchange(
    txn: &Txn,
    made: MadeAnswer,
    request_time: SystemTime,
    seen: Position,
) -> Exchanged {
    use http_body_util::BodyExt as _;
    let body = http_body_util::Full::new(made.body)
        .map_err(|e| -> crate::backend::BoxError { Box::new(e) });
    let body = BackendBody::from_stream(
        Box::pin(body),
        std::time::Duration::from_secs(1),
        txn.proxy.counters.clone(),
    );
    Exchanged {
        clock: Clock {
            request_time,
            response_time: SystemTime::now(),
            stored_at: Instant::now(),
            seen,
        },
        parts: made.parts,
        body,
        storage: Storage::Decided {
            plan: Ok(made.plan),
            hit_for_miss: None,
        },
        was_304: false,
    }
}

/// No response from any backend: the policy's `backend_error` answers (or asks to send
/// again: `Continue(None)`, or makes an answer to store: `Continue(Some)`), unless a stale
/// copy may answer; otherwise the failure is answered ([`failed`]).
fn answer_failure(
    txn: &mut Txn,
    mode: &FetchMode,
    failure: SendFailure,
) -> ControlFlow<Step, Option<Box<MadeAnswer>>> {
    let stale_answers = txn.stale.as_ref().is_some_and(|s| s.stale_ok) && !txn.background;
    let (status, detail) = failure.status_detail();
    txn.proxy.counters.fetch_failed.inc();
    // `FetchError WORDS` on the backend request's records (under VCL), before
    // vcl_backend_error runs, as Varnish logs it.
    let bereq = txn.vcl.as_deref().and_then(|v| v.bereq.as_ref());
    if let Some(t) = bereq.and_then(|b| b.vsl.as_deref()) {
        t.log("FetchError", failure.varnish_words());
    }
    if !stale_answers && let Some(outcome) = txn.policy.backend_error(txn, status, detail) {
        match outcome {
            ErrorOutcome::Retry => return ControlFlow::Continue(None),
            ErrorOutcome::Store(made) => return ControlFlow::Continue(Some(made)),
            ErrorOutcome::Step(step) => {
                if let FetchMode::Miss(guard) = mode {
                    guard.object().fail_with(status, detail);
                }
                return ControlFlow::Break(step);
            }
        }
    }
    ControlFlow::Break(failed(txn, mode, failure))
}

/// The fields of a backend response that are Shellac's own: the ESI program field, a
/// stored object's identity, source generation and status line (a backend never sets them), and the origin's
/// `Surrogate-Control` for Shellac (`esi.surrogate_control`), consumed before the policy sees
/// the response.
fn take_own_fields(txn: &mut Txn, headers: &mut HeaderMap) {
    headers.remove(crate::proxy::filter::esi::FIELD);
    headers.remove(crate::cache::identity::FIELD);
    headers.remove(crate::cache::representation::FIELD);
    headers.remove(crate::cache::status_line::FIELD);
    if super::super::surrogate::on_response(&txn.proxy.config.esi, headers) {
        txn.proxy.counters.esi_surrogate.inc();
        let url = txn.req.uri.path_and_query().map_or("/", |p| p.as_str());
        crate::proxy::filter::esi::turn_on(
            &mut txn.filters,
            (&txn.proxy.config.esi, &txn.proxy.counters),
            url,
            None,
        );
    }
}

/// The copy a 304 revalidated was purged or banned while the backend was asked: it is never
/// refreshed and served. The policy may fail the fetch (VCL 4.x, as Varnish does); otherwise
/// the object is fetched again, unconditionally (`Continue`: there is nothing left to
/// revalidate).
fn revalidated_gone(txn: &mut Txn, mode: &FetchMode, body: BackendBody) -> ControlFlow<Step> {
    txn.proxy.counters.cache_revalidated_gone.inc();
    txn.stale = None;
    drop(body);
    match txn.policy.stale_gone(txn) {
        Some(ErrorOutcome::Retry) | None => ControlFlow::Continue(()),
        // Answered as made: the copy it revalidated is gone, nothing new is stored here.
        Some(ErrorOutcome::Store(made)) => {
            if let FetchMode::Miss(guard) = mode {
                guard
                    .object()
                    .fail_with(StatusCode::SERVICE_UNAVAILABLE, "stale-gone");
            }
            ControlFlow::Break(made.instead)
        }
        Some(ErrorOutcome::Step(step)) => {
            if let FetchMode::Miss(guard) = mode {
                guard
                    .object()
                    .fail_with(StatusCode::SERVICE_UNAVAILABLE, "stale-gone");
            }
            ControlFlow::Break(step)
        }
    }
}

/// The body of a response the policy stores or delivers: marked to close its connection when
/// the backend or the policy (VCL's `beresp.http.connection`) said `close` — that connection
/// serves no other request, as Varnish closes it rather than recycle it — and read whole
/// first when `read_whole` ([`read_ahead`]).
async fn ready_body(
    txn: &mut Txn,
    mode: &FetchMode,
    parts: &mut Parts,
    body: &mut BackendBody,
    read_whole: bool,
) -> Result<(), Step> {
    if parts
        .extensions
        .remove::<crate::proxy::BackendClose>()
        .is_some()
        || crate::http::headers::connection_close(&parts.headers)
    {
        body.close_after();
    }
    if read_whole {
        read_ahead(txn, mode, parts, body).await?;
    }
    Ok(())
}

/// VCL's `beresp.do_stream = false`: the whole body is read before the response goes out,
/// so a body that fails (between_bytes_timeout, a cut connection) is a 503 rather than a
/// truncated response, and a body the backend framed by closing the connection gets a
/// `Content-Length`. At most `cache.max_object_size` is held: past it the rest streams.
async fn read_ahead(
    txn: &mut Txn,
    mode: &FetchMode,
    parts: &mut Parts,
    body: &mut BackendBody,
) -> Result<(), Step> {
    let mut read = body
        .buffer(txn.proxy.max_object_size)
        .await
        .map_err(|e| e.to_string());
    // A gzip body read whole is checked now (Varnish's testgunzip before delivery): a
    // malformed one fails the fetch like a cut one.
    if let Ok(Some(_)) = read
        && txn.proxy.config.compression.enabled
        && super::super::filter::gzip::coding(&parts.headers) == Some(Coding::Gzip)
        && let Err(e) = super::super::filter::gzip::check(body.buffered(), &txn.proxy.counters)
    {
        read = Err(e.to_string());
    }
    match read {
        Ok(Some(len)) => {
            // A length the backend sent stays (a HEAD's answer has one and no body).
            if !parts.headers.contains_key(header::CONTENT_LENGTH) {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            }
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => {
            tracing::warn!(error = %e, "backend body failed before delivery (beresp.do_stream = false)");
            if let FetchMode::Miss(guard) = mode {
                guard
                    .object()
                    .fail_with(StatusCode::SERVICE_UNAVAILABLE, "body-failed");
            }
            Err(Step::VclSynth(
                503,
                Some("Backend fetch failed".to_string()),
            ))
        }
    }
}

/// No backend could answer: waiters get the same error; the stale copy answers if allowed.
fn failed(txn: &mut Txn, mode: &FetchMode, failure: SendFailure) -> Step {
    let (status, detail) = failure.status_detail();
    if let FetchMode::Miss(guard) = mode {
        guard.object().fail_with(status, detail);
    }
    match txn.stale.take() {
        Some(stale) if stale.stale_ok && !txn.background => txn.deliver_stale(stale, detail),
        // A stale copy exists but may not be served (must-revalidate, proxy-revalidate,
        // s-maxage): RFC 9111 §5.2.2.2 says the error SHOULD be 504.
        Some(_) => Step::Synth(StatusCode::GATEWAY_TIMEOUT, detail),
        None => Step::Synth(status, detail),
    }
}

/// Whether the stale copy a 304 just revalidated is still stored (under its own variant's
/// key, the same object or the same response re-timed by a soft purge) and unbanned. A copy
/// purged or banned while the backend was asked must not come back refreshed.
async fn still_stored(txn: &Txn) -> bool {
    let (Some(primary), Some(stale)) = (&txn.key, &txn.stale) else {
        return false;
    };
    let cache = &txn.proxy.cache;
    let key = if stale.vary().is_empty() {
        primary.clone()
    } else {
        let names: Vec<_> = stale.vary().iter().map(|(n, _)| n.clone()).collect();
        let mut selected = HeaderMap::new();
        for (n, v) in stale.vary() {
            if let Some(v) = v {
                selected.append(n.clone(), v.clone());
            }
        }
        primary.with_variant(crate::cache::vary::variant_hash(&names, &selected))
    };
    if cache.bans.is_banned(&key, stale) {
        return false;
    }
    cache.storage.inspect(&key).await.iter().any(|(_, o)| {
        Arc::ptr_eq(o, stale)
            || (o.status == stale.status
                && o.body_len == stale.body_len
                && o.headers.block() == stale.headers.block())
    })
}

/// A fetch the policy left: the busy object is abandoned, so waiters look up again.
pub(super) fn leave(mode: &FetchMode) {
    if let FetchMode::Miss(guard) = mode {
        guard.object().abandon();
    }
}
