//! HTTP/2 sessions on client connections: hyper's HTTP/2 server over the frame watcher
//! (`frames.rs`), each request checked (`check.rs`) and handed to [`Proxy::handle`] exactly as
//! an HTTP/1.1 request is, with the connection's timeouts and limits.
//!
//! [`serve`] is the one entry point, whatever carries the bytes: a cleartext socket whose
//! first bytes were the HTTP/2 preface (h2c with prior knowledge), or a TLS stream whose ALPN
//! chose `h2`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::Request;
use http_body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use super::h1::count_violation;
use super::open::ms;
use crate::backend::{BodyOutcome, BodyPace};
use crate::clock::now_ms;
use crate::proxy::Handled;
use crate::reload::Live;

mod check;
mod frames;
mod inline;
mod interim;
mod response;
mod state;

pub(crate) use frames::PREFACE;
use response::{Answer, body_outcome, finish};
use state::{H2State, Stream};

/// Serves one HTTP/2 connection on `io` until it ends: the client closes it, a timeout or a
/// defence ends it, or Shellac shuts down (GOAWAY, the streams in flight finish). `io`
/// starts with the client's connection preface (nothing of it consumed). The caller keeps the
/// connection counted as open while this runs.
///
/// Settings come from the configuration current when it starts (`[http2]`, and `[server]`'s
/// `max_header_size`, `max_headers`, `max_request_line`, `max_body_size`, `idle_timeout`,
/// `header_read_timeout`, `send_timeout`); each request reads the configuration current when
/// it arrives, as over HTTP/1.1.
pub(crate) async fn serve<I>(
    io: I,
    peer: SocketAddr,
    live: Arc<Live>,
    mut shutdown: watch::Receiver<bool>,
    tls: Option<Arc<crate::tls::server::ConnTls>>,
    local: super::local::ConnLocal,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let proxy = live.load();
    let config = proxy.config.clone();
    let counters = proxy.counters.clone();
    drop(proxy);
    counters.h2_conn.inc();
    let h2 = &config.http2;
    let server = &config.server;
    let started = now_ms();
    let shared = Arc::new(H2State::new(started));
    let header_bytes = u32::try_from(server.max_header_size.0).unwrap_or(u32::MAX);
    let watched = frames::Watched::new(
        io,
        shared.clone(),
        counters.clone(),
        frames::Limits {
            reset_budget: h2.reset_budget,
            control_per_second: h2.control_frames_per_second,
            max_continuations: u32::try_from(
                server
                    .max_header_size
                    .0
                    .div_ceil(h2.max_frame_size.0.max(1)),
            )
            .unwrap_or(u32::MAX)
            .max(4),
            max_block_bytes: server.max_header_size.0.saturating_mul(2),
            max_frame_size: u32::try_from(h2.max_frame_size.0).unwrap_or(16_777_215),
        },
    );
    let limits = server.limits();
    let body_timeout_ms = ms(server.body_timeout.0);
    let body_min_rate = server.body_min_rate.0;
    let max_requests = h2.max_requests;
    let svc_shared = shared.clone();
    let svc_live = live.clone();
    // The same counters every configuration shares (a reload keeps them).
    let svc_counters = counters.clone();
    let service = service_fn(move |mut req: Request<Incoming>| {
        // Over TLS (ALPN `h2`): what the connection negotiated travels with each request.
        if let Some(t) = &tls {
            req.extensions_mut()
                .insert(crate::tls::server::Session(t.clone()));
        }
        // The idle timeout VCL set for the connection, for `sess.timeout_idle` to read.
        let idle_override = svc_shared.idle_override.load(Ordering::Relaxed);
        if idle_override != 0 {
            req.extensions_mut()
                .insert(crate::proxy::SessionIdle(Some(Duration::from_millis(
                    idle_override,
                ))));
        }
        // A load and a branch per request once the handle is kept (the first request).
        if svc_shared.interim.get().is_none()
            && let Some(handle) = interim::take_handle(&mut req)
        {
            let _ = svc_shared.interim.set(handle);
        }
        let stream = Stream::open(&svc_shared);
        let n = svc_shared.requests.fetch_add(1, Ordering::Relaxed) + 1;
        if max_requests > 0 && n == max_requests {
            svc_shared.enough.store(true, Ordering::Relaxed);
            svc_shared.wake.notify_one();
        }
        // One configuration snapshot per request, kept until its response is done.
        let proxy = svc_live.load();
        proxy.counters.h2_req.inc();
        // `server.ip` / `local.ip`, when the VCL program reads them.
        local.attach(&proxy, &svc_live, &mut req);
        let req = match check::request(req, &limits) {
            Ok(req) => req,
            Err(refusal) => {
                count_violation(&proxy.counters, refusal.violation);
                let resp = proxy.refuse_request(
                    refusal.violation,
                    peer.ip(),
                    Some(refusal.line.as_bytes()),
                );
                let reset = refusal.malformed.then_some(h2::Reason::PROTOCOL_ERROR);
                return Answer::Ready(Some(finish(resp, stream, reset, &proxy)));
            }
        };
        // A body is paced as over HTTP/1.1 (`body_timeout`, `body_min_rate`) and bounded by
        // `max_body_size` while it streams to the backend; how it ended is read back here.
        let mut req = req;
        let outcome = (!req.body().is_end_stream()).then(|| {
            let outcome = Arc::new(BodyOutcome::default());
            req.extensions_mut().insert(BodyPace {
                timeout_ms: body_timeout_ms,
                min_rate: body_min_rate,
                outcome: outcome.clone(),
            });
            outcome
        });
        match proxy.handle(req, peer) {
            Handled::Done(resp, proxy) => {
                let resp = body_outcome(resp, outcome.as_deref(), &proxy);
                Answer::Ready(Some(finish(resp, stream, None, &proxy)))
            }
            Handled::Waits(mut rest) => {
                // 1xx responses from its backend go out on its stream (`interim.rs`).
                rest.forward_interim(Arc::new(interim::StreamInterim::new(
                    svc_shared.interim.get(),
                    n,
                    svc_counters.clone(),
                )));
                Answer::Pending(Box::pin(async move {
                    let (resp, proxy) = rest.run().await;
                    let resp = body_outcome(resp, outcome.as_deref(), &proxy);
                    finish(resp, stream, None, &proxy)
                }))
            }
        }
    });
    // Each stream's first poll runs on this task; only a stream that has to wait becomes a
    // task of its own (`inline.rs`).
    let mut builder = http2::Builder::new(inline::InlineFirst);
    builder
        .max_concurrent_streams(h2.max_concurrent_streams)
        .initial_stream_window_size(window(h2.stream_window.0))
        .initial_connection_window_size(window(h2.connection_window.0))
        .max_frame_size(u32::try_from(h2.max_frame_size.0).unwrap_or(16_777_215))
        .max_header_list_size(header_bytes)
        .max_send_buf_size(usize::try_from(h2.stream_send_buffer.0).unwrap_or(usize::MAX))
        // h2's own bound on the resets it sends for a client's errors; the watcher's
        // `reset_budget` (refilled by completed responses) normally acts first.
        .max_local_error_reset_streams(Some((h2.reset_budget as usize).max(1024)));
    let conn = builder.serve_connection(TokioIo::new(watched), service);
    tokio::pin!(conn);

    let idle = ms(server.idle_timeout.0);
    let head = ms(server.header_read_timeout.0);
    let send = ms(server.send_timeout.0);
    let tick = idle.min(head).min(send).max(1);
    // `idle_release` over HTTP/2: once no stream has been open for that long, two wakes of
    // this task (1 ms apart) poll the connection with nothing to read, and the patched h2
    // frees its buffers and HPACK encoder table (two idle polls in a row: PATCHES.md §3, §6).
    // `poked` / `released`: the idle period (its `idle_since`) woken for once / twice.
    let release = ms(server.idle_release.0);
    let (mut poked, mut released) = (u64::MAX, u64::MAX);
    let first = if release > 0 { tick.min(release) } else { tick };
    let timer = tokio::time::sleep(Duration::from_millis(first));
    tokio::pin!(timer);
    // After a graceful GOAWAY: the streams in flight get `idle_timeout` to finish.
    let mut closing_since: Option<u64> = None;
    macro_rules! close {
        () => {
            if closing_since.is_none() {
                closing_since = Some(now_ms());
                conn.as_mut().graceful_shutdown();
            }
        };
    }
    if *shutdown.borrow() {
        close!();
    }
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "HTTP/2 connection ended with error");
                }
                return;
            }
            _ = shared.wake.notified() => {
                if shared.enough.load(Ordering::Relaxed) && closing_since.is_none() {
                    counters.h2_max_requests.inc();
                    close!();
                }
                // VCL changed `sess.timeout_idle`: look again within it.
                let set = shared.idle_override.load(Ordering::Relaxed);
                if set != 0 {
                    timer.as_mut().reset(
                        tokio::time::Instant::now() + Duration::from_millis(tick.min(set).max(1)),
                    );
                }
            }
            _ = timer.as_mut() => {
                let now = now_ms();
                if !shared.preface_done.load(Ordering::Relaxed) && now >= started + head {
                    counters.client_header_timeout.inc();
                    return;
                }
                let block = shared.block_since.load(Ordering::Relaxed);
                if block != 0 && now >= block + head {
                    counters.client_header_timeout.inc();
                    return;
                }
                if shared.stalled.load(Ordering::Relaxed) > 0
                    && now >= shared.last_data.load(Ordering::Relaxed) + send
                {
                    counters.h2_slow_reader.inc();
                    return;
                }
                let active = shared.active.load(Ordering::Relaxed);
                // VCL's `sess.timeout_idle` for this connection, if set.
                let idle = match shared.idle_override.load(Ordering::Relaxed) {
                    0 => idle,
                    set => set,
                };
                let mut wait = tick.min(idle);
                if release > 0 {
                    let since = shared.idle_since.load(Ordering::Relaxed);
                    if active > 0 {
                        wait = wait.min(release);
                    } else if released == since {
                        // Released: wakes at growing intervals, up to the tick, so a stream
                        // that opens and ends between two of them is noticed by the next.
                        wait = wait.min(release.max(now.saturating_sub(since)));
                    } else if now < since + release {
                        wait = wait.min(since + release - now);
                    } else if poked != since {
                        // The loop polls the connection now and again in 1 ms.
                        poked = since;
                        wait = 1;
                    } else {
                        released = since;
                        wait = wait.min(release);
                    }
                }
                match closing_since {
                    Some(since) if now >= since + idle => return,
                    None if active == 0
                        && now >= shared.idle_since.load(Ordering::Relaxed) + idle =>
                    {
                        counters.client_idle_closed.inc();
                        close!();
                    }
                    _ => {}
                }
                timer.as_mut().reset(tokio::time::Instant::now() + Duration::from_millis(wait.max(1)));
            }
            changed = shutdown.changed(), if closing_since.is_none() => {
                if changed.is_err() || *shutdown.borrow() {
                    close!();
                }
            }
        }
    }
}

/// A flow-control window from a size setting (validated to 65,535 – 2³¹−1).
fn window(bytes: u64) -> u32 {
    u32::try_from(bytes)
        .unwrap_or(i32::MAX as u32)
        .min(i32::MAX as u32)
}
