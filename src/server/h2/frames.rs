//! The frame watcher: the byte stream of an HTTP/2 connection, read and written through a
//! frame-header scanner on each side, so Shellac counts and bounds what the h2 library
//! handles silently (resets either way, control-frame floods, CONTINUATION floods) and ends an
//! abusive connection with its own `GOAWAY` and the right error code.
//!
//! Only the 9-byte frame headers are parsed (and the error code of an outgoing `RST_STREAM` or
//! `GOAWAY`); payloads are skipped by length, so the cost is a few instructions per frame. The
//! h2 library still validates everything (RFC 9113, RFC 7541); the watcher never changes a
//! byte it passes. When it ends a connection it drops the read that broke a limit (h2 never
//! sees it), waits until h2's output is at a frame boundary, writes `GOAWAY` (last stream: the
//! highest the client opened), flushes, shuts the socket's write side and then shows h2 an
//! end of stream.

use std::sync::Arc;
use std::sync::atomic::Ordering;

mod scan;
mod watched_io;

use super::state::H2State;
use crate::clock::now_ms;
use crate::stats::{Counter, Counters};
pub(crate) use scan::PREFACE;
use scan::{
    ACK, CANCEL, CONTINUATION, DATA, END_HEADERS, END_STREAM, ENHANCE_YOUR_CALM, Frame, GOAWAY,
    HEADERS, INTERNAL_ERROR, NO_ERROR, PING, PRIORITY, PUSH_PROMISE, RST_STREAM, SETTINGS, Scan,
    WINDOW_UPDATE, goaway,
};

/// The bounds the watcher enforces, from `[http2]` and `[server]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub reset_budget: u32,
    pub control_per_second: u32,
    /// CONTINUATION frames one header block may use: as many as a header list of
    /// `server.max_header_size` needs in frames of `http2.max_frame_size`, at least 4 —
    /// never more than h2's own bound (at least 5, and 1.25× that need), so the watcher
    /// acts first and names the attack.
    pub max_continuations: u32,
    /// Encoded bytes one header block may take (twice `server.max_header_size`).
    pub max_block_bytes: u64,
    /// `SETTINGS_MAX_FRAME_SIZE` Shellac announced.
    pub max_frame_size: u32,
}

/// Why the watcher ends a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Abuse {
    RapidReset,
    MadeYouReset,
    ControlFlood,
    ContinuationFlood,
}

/// RFC 9113 §7 codes of the connection errors the watcher raises itself (h2 would answer
/// these frames with `PROTOCOL_ERROR`).
const PROTOCOL_ERROR: u32 = 0x1;
const FLOW_CONTROL_ERROR: u32 = 0x3;
const FRAME_SIZE_ERROR: u32 = 0x6;

/// A `GOAWAY` of Shellac's own on its way out.
#[derive(Debug)]
enum Kill {
    Writing { frame: [u8; 17], at: usize },
    Flushing,
    ShuttingDown,
    Done,
}

/// A client connection's stream seen through the two scanners. `I` is the socket, or the
/// TLS stream over it.
pub(super) struct Watched<I> {
    io: I,
    shared: Arc<H2State>,
    counters: Arc<Counters>,
    limits: Limits,
    preface_left: u8,
    rd: Scan,
    wr: Scan,
    /// Highest stream the client opened (the last stream of Shellac's GOAWAY).
    max_stream: u32,
    /// CONTINUATION frames and encoded bytes of the header block in progress.
    block: Option<(u32, u64)>,
    /// Resets the connection may still cause (refilled by completed responses).
    resets_left: i64,
    /// The client's first frame (which must be SETTINGS) is still to come.
    first_frame: bool,
    /// A SETTINGS parameter split between reads: its bytes so far.
    setting: [u8; 6],
    setting_have: u8,
    /// Control frames left in the bucket, and when it was last refilled (ms).
    tokens: u32,
    refilled: u64,
    kill: Option<Kill>,
}

impl<I> Watched<I> {
    pub(super) fn new(
        io: I,
        shared: Arc<H2State>,
        counters: Arc<Counters>,
        limits: Limits,
    ) -> Watched<I> {
        Watched {
            io,
            shared,
            counters,
            limits,
            preface_left: PREFACE.len() as u8,
            rd: Scan::default(),
            wr: Scan::default(),
            max_stream: 0,
            block: None,
            resets_left: i64::from(limits.reset_budget),
            first_frame: true,
            setting: [0; 6],
            setting_have: 0,
            tokens: limits.control_per_second,
            refilled: now_ms(),
            kill: None,
        }
    }

    /// Acts on one frame header the client sent; false when the connection must end.
    fn on_read(&mut self, f: Frame) -> bool {
        self.shared.preface_done.store(true, Ordering::Relaxed);
        // RFC 9113 checks h2 answers with another code than the RFC's (PROTOCOL_ERROR).
        if std::mem::take(&mut self.first_frame) && (f.kind != SETTINGS || f.flags & ACK != 0) {
            // §3.4: the client's preface is followed by a SETTINGS frame.
            return self.end(PROTOCOL_ERROR);
        }
        let size_ok = f.len <= self.limits.max_frame_size
            && match f.kind {
                // §6.4, §6.7, §6.9: fixed lengths; §6.5: 6-byte parameters, an ACK empty. (A
                // PRIORITY of another length than 5 is a stream error, §6.3: h2 resets the
                // stream, vendor/h2/PATCHES.md §9.)
                RST_STREAM | WINDOW_UPDATE => f.len == 4,
                PING => f.len == 8,
                SETTINGS if f.flags & ACK != 0 => f.len == 0,
                SETTINGS => f.len.is_multiple_of(6),
                _ => true,
            };
        if !size_ok {
            return self.end(FRAME_SIZE_ERROR);
        }
        if let Some((continuations, bytes)) = self.block.as_mut() {
            // h2 refuses anything but the block's CONTINUATION frames (connection error).
            if f.kind == CONTINUATION {
                *continuations += 1;
                *bytes += u64::from(f.len);
                if *continuations > self.limits.max_continuations
                    || *bytes > self.limits.max_block_bytes
                {
                    return self.abuse(Abuse::ContinuationFlood);
                }
                if f.flags & END_HEADERS != 0 {
                    self.block = None;
                    self.shared.block_since.store(0, Ordering::Relaxed);
                }
            }
            return true;
        }
        match f.kind {
            HEADERS => {
                if f.stream % 2 == 1 && f.stream > self.max_stream {
                    self.max_stream = f.stream;
                }
                if f.flags & END_HEADERS == 0 {
                    if u64::from(f.len) > self.limits.max_block_bytes {
                        return self.abuse(Abuse::ContinuationFlood);
                    }
                    self.block = Some((0, u64::from(f.len)));
                    self.shared
                        .block_since
                        .store(now_ms().max(1), Ordering::Relaxed);
                }
                true
            }
            RST_STREAM => {
                self.counters.h2_rst_received.inc();
                self.spend_reset(Abuse::RapidReset)
            }
            PRIORITY | SETTINGS | PING => self.control(),
            DATA | PUSH_PROMISE | GOAWAY | WINDOW_UPDATE | CONTINUATION => true,
            // Extension frames are ignored by h2 (RFC 9113 §4.1), but each costs a read.
            _ => self.control(),
        }
    }

    /// Acts on one frame h2 wrote.
    fn on_write(&mut self, f: Frame) {
        match f.kind {
            DATA | HEADERS if f.stream != 0 => {
                if f.kind == DATA && f.len > 0 {
                    self.shared.last_data.store(now_ms(), Ordering::Relaxed);
                }
                if f.flags & END_STREAM != 0 {
                    // A completed response gives back one reset.
                    self.resets_left =
                        (self.resets_left + 1).min(i64::from(self.limits.reset_budget));
                }
            }
            RST_STREAM => {
                self.counters.h2_rst_sent.inc();
                // Resets the client provoked (a protocol error on the stream, a refused
                // stream); not Shellac's own cancels and internal errors.
                if !matches!(f.code, NO_ERROR | INTERNAL_ERROR | CANCEL) {
                    self.spend_reset(Abuse::MadeYouReset);
                }
            }
            GOAWAY => {
                if f.code == NO_ERROR {
                    self.counters.h2_goaway_sent.inc();
                } else {
                    self.counters.h2_goaway_error.inc();
                }
                // h2's own defences, named in the debug data of its GOAWAY — unless the
                // watcher already ended the connection for an abuse (counted then): h2's
                // GOAWAY can follow its resets in the same write.
                let c = &self.counters;
                let reason = if self.kill.is_some() {
                    &[][..]
                } else {
                    &f.debug[..usize::from(f.debug_len)]
                };
                match reason {
                    b"too_many_resets" => c.h2_rapid_reset.inc(),
                    b"too_many_internal_resets" => c.h2_made_you_reset.inc(),
                    b"too_many_continuations" => c.h2_continuation_flood.inc(),
                    b"header_list_way_too_large" => c.h2_hpack_bomb.inc(),
                    b"too_many_data_frames" => c.h2_data_flood.inc(),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn spend_reset(&mut self, kind: Abuse) -> bool {
        self.resets_left -= 1;
        self.resets_left >= 0 || self.abuse(kind)
    }

    /// One control frame from the bucket (refilled at `control_per_second`).
    fn control(&mut self) -> bool {
        if self.tokens == 0 {
            let now = now_ms();
            let rate = u64::from(self.limits.control_per_second);
            let earned = now.saturating_sub(self.refilled).saturating_mul(rate) / 1000;
            if earned > 0 {
                self.tokens = earned.min(rate) as u32;
                self.refilled = now;
            }
        }
        if self.tokens == 0 {
            return self.abuse(Abuse::ControlFlood);
        }
        self.tokens -= 1;
        true
    }

    /// Checks SETTINGS parameters as they stream by (§6.5.2): h2 checks them too, but
    /// answers an `INITIAL_WINDOW_SIZE` over 2³¹−1 with `PROTOCOL_ERROR`.
    fn on_settings(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            let at = usize::from(self.setting_have);
            let take = bytes.len().min(6 - at);
            self.setting[at..at + take].copy_from_slice(&bytes[..take]);
            self.setting_have += take as u8;
            bytes = &bytes[take..];
            if self.setting_have == 6 {
                self.setting_have = 0;
                let p = self.setting;
                let id = u16::from_be_bytes([p[0], p[1]]);
                let value = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
                if id == 4 && value > 0x7fff_ffff {
                    return self.end(FLOW_CONTROL_ERROR);
                }
            }
        }
        true
    }

    /// Starts ending the connection with `GOAWAY` and `code` (a protocol error of the
    /// client's, not an attack); always false.
    fn end(&mut self, code: u32) -> bool {
        if self.kill.is_none() {
            self.counters.h2_goaway_error.inc();
            self.kill = Some(Kill::Writing {
                frame: goaway(self.max_stream, code),
                at: 0,
            });
        }
        false
    }

    /// Starts ending the connection with `GOAWAY ENHANCE_YOUR_CALM`; always false.
    fn abuse(&mut self, kind: Abuse) -> bool {
        if self.kill.is_some() {
            return false;
        }
        let counter: &Counter = match kind {
            Abuse::RapidReset => &self.counters.h2_rapid_reset,
            Abuse::MadeYouReset => &self.counters.h2_made_you_reset,
            Abuse::ControlFlood => &self.counters.h2_control_flood,
            Abuse::ContinuationFlood => &self.counters.h2_continuation_flood,
        };
        counter.inc();
        self.counters.h2_goaway_error.inc();
        tracing::debug!(?kind, "HTTP/2 connection ended: GOAWAY ENHANCE_YOUR_CALM");
        self.kill = Some(Kill::Writing {
            frame: goaway(self.max_stream, ENHANCE_YOUR_CALM),
            at: 0,
        });
        false
    }
}

#[cfg(test)]
mod tests;
