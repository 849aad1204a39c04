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
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use super::open::ms;
use crate::clock::now_ms;
use crate::reload::Live;
use crate::vcl::run::SessTimeout;

mod check;
mod clocks;
mod frames;
mod inline;
mod interim;
mod response;
mod service;
mod state;

use clocks::{Clocks, Timer};
pub(crate) use frames::PREFACE;
use service::Service;
use state::H2State;

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
    let shared = Arc::new(H2State::new(started, ms(server.send_total_timeout.0)));
    let header_bytes = u32::try_from(server.max_header_size.0).unwrap_or(u32::MAX);
    let watched = frames::Watched::new(
        io,
        shared.clone(),
        counters.clone(),
        frame_limits(h2, server),
    );
    let svc = Service {
        tls,
        shared: shared.clone(),
        live: live.clone(),
        // The same counters every configuration shares (a reload keeps them).
        counters: counters.clone(),
        local,
        limits: server.limits(),
        peer,
        body_timeout_ms: ms(server.body_timeout.0),
        body_min_rate: server.body_min_rate.0,
        max_requests: h2.max_requests,
    };
    let service = service_fn(move |req: Request<Incoming>| svc.call(req));
    // Each stream's first poll runs on this task; only a stream that has to wait becomes a
    // task of its own (`inline.rs`).
    let builder = builder(h2, header_bytes);
    let conn = builder.serve_connection(TokioIo::new(watched), service);
    tokio::pin!(conn);

    let mut clocks = Clocks::new(server, started);
    let timer = tokio::time::sleep(Duration::from_millis(clocks.first()));
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
                // VCL changed a `sess.*` timeout: look again within it.
                let sess = &shared.sess;
                if sess.any() {
                    let set = sess
                        .ms(SessTimeout::Idle, clocks.tick)
                        .min(sess.ms(SessTimeout::IdleSend, clocks.tick))
                        .min(sess.ms(SessTimeout::Send, clocks.tick));
                    timer.as_mut().reset(
                        tokio::time::Instant::now() + Duration::from_millis(clocks.tick.min(set).max(1)),
                    );
                }
            }
            _ = timer.as_mut() => {
                let wait = match clocks.on_timer(&shared, &counters, closing_since) {
                    Timer::End => return,
                    Timer::Next { close, wait } => {
                        if close {
                            close!();
                        }
                        wait
                    }
                };
                timer.as_mut().reset(tokio::time::Instant::now() + Duration::from_millis(wait));
            }
            changed = shutdown.changed(), if closing_since.is_none() => {
                if changed.is_err() || *shutdown.borrow() {
                    close!();
                }
            }
        }
    }
}

/// hyper's HTTP/2 server as `[http2]` says.
fn builder(
    h2: &crate::config::http2::Http2Config,
    header_bytes: u32,
) -> http2::Builder<inline::InlineFirst> {
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
    builder
}

/// The watcher's bounds from `[http2]` and `[server]`.
fn frame_limits(
    h2: &crate::config::http2::Http2Config,
    server: &crate::config::ServerConfig,
) -> frames::Limits {
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
    }
}

/// A flow-control window from a size setting (validated to 65,535 – 2³¹−1).
fn window(bytes: u64) -> u32 {
    u32::try_from(bytes)
        .unwrap_or(i32::MAX as u32)
        .min(i32::MAX as u32)
}
