//! An HTTP/2 connection's clocks, checked by its loop's timer: the preface and a header block
//! within `header_read_timeout`, a stalled reader within `send_timeout`, a response waiting
//! for the client past `send_total_timeout` (VCL's `sess.send_timeout`), `idle_timeout` (VCL's
//! `sess.timeout_idle` if set) with no stream open, the streams in flight after a GOAWAY, and
//! `idle_release` (two wakes 1 ms apart let the patched h2 free its buffers and HPACK encoder
//! table: PATCHES.md §3, §6).

use std::sync::atomic::Ordering;

use super::state::H2State;
use crate::clock::now_ms;
use crate::config::ServerConfig;
use crate::server::open::ms;
use crate::stats::Counters;
use crate::vcl::run::SessTimeout;

/// The settings the timer checks (ms), and where the idle release stands.
pub(super) struct Clocks {
    started: u64,
    idle: u64,
    head: u64,
    send: u64,
    /// The longest the timer waits.
    pub(super) tick: u64,
    release: u64,
    /// The idle period (its `idle_since`) woken for once / twice.
    poked: u64,
    released: u64,
}

/// What the timer found.
pub(super) enum Timer {
    /// A timeout ended the connection (counted).
    End,
    /// `close`: idle too long, a graceful GOAWAY is due; the timer fires again in `wait` ms.
    Next { close: bool, wait: u64 },
}

impl Clocks {
    pub(super) fn new(server: &ServerConfig, started: u64) -> Clocks {
        let idle = ms(server.idle_timeout.0);
        let head = ms(server.header_read_timeout.0);
        let send = ms(server.send_timeout.0);
        let send_total = match ms(server.send_total_timeout.0) {
            0 => u64::MAX,
            t => t,
        };
        Clocks {
            started,
            idle,
            head,
            send,
            tick: idle.min(head).min(send).min(send_total).max(1),
            release: ms(server.idle_release.0),
            poked: u64::MAX,
            released: u64::MAX,
        }
    }

    /// When the timer first fires (ms from now).
    pub(super) fn first(&self) -> u64 {
        if self.release > 0 {
            self.tick.min(self.release)
        } else {
            self.tick
        }
    }

    /// The timer fired: a timeout that ends the connection, or when to look again (and
    /// whether the connection, idle too long, closes gracefully). `closing_since`: when a
    /// graceful GOAWAY was sent, if it was.
    pub(super) fn on_timer(
        &mut self,
        shared: &H2State,
        counters: &Counters,
        closing_since: Option<u64>,
    ) -> Timer {
        let now = now_ms();
        if !shared.preface_done.load(Ordering::Relaxed) && now >= self.started + self.head {
            counters.client_header_timeout.inc();
            return Timer::End;
        }
        let block = shared.block_since.load(Ordering::Relaxed);
        if block != 0 && now >= block + self.head {
            counters.client_header_timeout.inc();
            return Timer::End;
        }
        // VCL's `sess.idle_send_timeout`, `sess.timeout_idle` and `sess.timeout_linger` for
        // this connection, if set.
        let sess = &shared.sess;
        let send = sess.ms(SessTimeout::IdleSend, self.send);
        if shared.stalled.load(Ordering::Relaxed) > 0
            && now >= shared.last_data.load(Ordering::Relaxed) + send
        {
            counters.h2_slow_reader.inc();
            return Timer::End;
        }
        // A response that has taken longer than the total limit and waits for the client:
        // the session is closed, as over HTTP/1.1 (h2 offers no way to reset a stream whose
        // body it does not poll).
        let total = shared.send_total();
        if total > 0
            && shared.stalled.load(Ordering::Relaxed) > 0
            && shared.sending_too_long(now, total)
        {
            counters.client_send_total_timeout.inc();
            return Timer::End;
        }
        let active = shared.active.load(Ordering::Relaxed);
        let idle = sess.ms(SessTimeout::Idle, self.idle);
        // A timeout VCL set shorter than the tick is looked at within it (one of 0: at the
        // next tick).
        let mut wait = [idle, send, total]
            .into_iter()
            .filter(|&t| t > 0)
            .fold(self.tick, u64::min);
        let release = sess.ms(SessTimeout::Linger, self.release);
        if release > 0 {
            let since = shared.idle_since.load(Ordering::Relaxed);
            if active > 0 {
                wait = wait.min(release);
            } else if self.released == since {
                // Released: wakes at growing intervals, up to the tick, so a stream
                // that opens and ends between two of them is noticed by the next.
                wait = wait.min(release.max(now.saturating_sub(since)));
            } else if now < since + release {
                wait = wait.min(since + release - now);
            } else if self.poked != since {
                // The loop polls the connection now and again in 1 ms.
                self.poked = since;
                wait = 1;
            } else {
                self.released = since;
                wait = wait.min(release);
            }
        }
        let close = match closing_since {
            Some(since) if now >= since + idle => return Timer::End,
            None if active == 0 && now >= shared.idle_since.load(Ordering::Relaxed) + idle => {
                counters.client_idle_closed.inc();
                true
            }
            _ => false,
        };
        Timer::Next {
            close,
            wait: wait.max(1),
        }
    }
}
