//! The clocks of an HTTP/1.1 session: its idle, release, header-read, body and send timeouts,
//! checked by one timer that is not touched per request.

use std::future::Future;
use std::sync::atomic::Ordering;

use crate::config::ServerConfig;
use crate::server::open::ms;
use crate::stats::Counters;
use crate::vcl::run::SessTimeout;

use super::{ConnState, PHASE_HEAD, PHASE_IDLE};

/// A session's timeouts, in milliseconds.
pub(super) struct Clocks {
    idle: u64,
    /// `idle_release`; `u64::MAX`: never released.
    release: u64,
    head: u64,
    body: u64,
    send: u64,
    /// 0: no total limit.
    send_total: u64,
    min_rate: u64,
    /// The longest the timer sleeps: the shortest timeout (or `idle_release`).
    tick: u64,
}

/// What the timer found.
pub(super) enum Tick {
    /// A timeout ended the connection (counted).
    End,
    /// The idle timeout passed: the connection closes gracefully (counted); the timer fires
    /// next at this time.
    IdleClose(u64),
    /// Nothing due; the timer fires next at this time.
    Next(u64),
}

impl Clocks {
    pub(super) fn of(cfg: &ServerConfig) -> Clocks {
        let idle = ms(cfg.idle_timeout.0);
        // 0: never released.
        let release = match ms(cfg.idle_release.0) {
            0 => u64::MAX,
            r => r,
        };
        let head = ms(cfg.header_read_timeout.0);
        let body = ms(cfg.body_timeout.0);
        let send = ms(cfg.send_timeout.0);
        // 0: no total limit.
        let send_total = ms(cfg.send_total_timeout.0);
        // The timer fires at the current phase's deadline or after the shortest timeout (or
        // `idle_release`), whichever is first, and re-checks: a phase that started after the
        // timer was set can only end later than that tick, so no deadline is ever missed.
        // Body and send stalls are noticed within one tick of their deadline.
        let tick = idle
            .min(head)
            .min(body)
            .min(send)
            .min(release)
            .min(if send_total == 0 {
                u64::MAX
            } else {
                send_total
            });
        Clocks {
            idle,
            release,
            head,
            body,
            send,
            send_total,
            min_rate: cfg.body_min_rate.0,
            tick,
        }
    }

    /// The timeouts at `now` (`closing`: the session is already closing gracefully): a
    /// release asked for when one is due, what is counted, and when to look again.
    pub(super) fn check(
        &self,
        state: &ConnState,
        counters: &Counters,
        now: u64,
        closing: bool,
    ) -> Tick {
        // The timeouts VCL set for this session (`sess.*`), else the configured ones.
        let sess = &state.sess;
        let send = sess.ms(SessTimeout::IdleSend, self.send);
        let send_total = sess.ms(SessTimeout::Send, self.send_total);
        // One VCL set shorter than the tick is looked at within it (0: no total limit; a
        // stall allowed no time at all is noticed at the next tick).
        let tick = [send, send_total]
            .into_iter()
            .filter(|&t| t > 0)
            .fold(self.tick, u64::min);
        if state.send_stalled(now, send) {
            counters.client_send_timeout.inc();
            return Tick::End;
        }
        if state.send_too_long(now, send_total) {
            counters.client_send_total_timeout.inc();
            return Tick::End;
        }
        if state.body_too_slow(now, self.body, self.min_rate) {
            counters.client_body_timeout.inc();
            return Tick::End;
        }
        let since = state.since_ms.load(Ordering::Relaxed);
        let phase = state.phase.load(Ordering::Relaxed);
        // VCL's `sess.timeout_idle` and `sess.timeout_linger` for this session (a released
        // session's are parked with its socket and given to the next one: `park.rs`).
        let idle = sess.ms(SessTimeout::Idle, self.idle);
        let release = match sess.ms(SessTimeout::Linger, self.release) {
            0 => u64::MAX,
            r => r,
        };
        let (expired, next) = match phase {
            PHASE_IDLE if !closing => {
                let release_at = since.saturating_add(release);
                if now >= release_at && now < since + idle {
                    // hyper reads next (the session polls it again) and, if the gate agrees
                    // the connection is idle, sees the end of the stream.
                    state.want_release();
                }
                let next = if now < release_at {
                    release_at
                } else {
                    since + idle
                };
                (now >= since + idle, next.min(since + idle))
            }
            PHASE_HEAD if !closing => (now >= since + self.head, since + self.head),
            _ => (false, u64::MAX),
        };
        let at = next.min(now + tick).max(now + 1);
        match phase {
            PHASE_IDLE if expired => {
                counters.client_idle_closed.inc();
                Tick::IdleClose(at)
            }
            PHASE_HEAD if expired => {
                counters.client_header_timeout.inc();
                Tick::End
            }
            _ => Tick::Next(at),
        }
    }
}

/// Polls the session's timer (a tokio `Sleep`) as its `select!` does on every wake-up of the
/// connection's task, without asking tokio each time: once the timer is registered with this
/// task's waker, the timer wheel wakes the task when it fires, and until then
/// `Sleep::is_elapsed` (one atomic load) says it has not. The `Sleep` is polled only on the
/// first poll after a reset, from another waker, or once it is elapsed. Measured with
/// callgrind: ~170 instructions per static6k hit (bench/RESULTS.md, "twelfth stop: loop").
#[derive(Default)]
pub(super) struct Armed {
    /// The waker the timer holds since its last poll (`None`: not polled since a reset).
    waker: Option<std::task::Waker>,
}

impl Armed {
    /// Ready once `sleep` fired.
    pub(super) fn poll(
        &mut self,
        sleep: std::pin::Pin<&mut tokio::time::Sleep>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) && !sleep.is_elapsed() {
            return std::task::Poll::Pending;
        }
        let polled = sleep.poll(cx);
        self.waker = polled.is_pending().then(|| cx.waker().clone());
        polled
    }

    /// `sleep` set to fire at `at`: polled again before it is trusted.
    pub(super) fn reset(
        &mut self,
        sleep: std::pin::Pin<&mut tokio::time::Sleep>,
        at: tokio::time::Instant,
    ) {
        sleep.reset(at);
        self.waker = None;
    }
}
