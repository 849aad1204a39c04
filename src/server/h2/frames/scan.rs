//! The frame-header scanner the watcher runs on each side of the connection ([`Scan`]):
//! frame boundaries followed by length, the 9-byte headers parsed, the error code of a
//! `RST_STREAM` or `GOAWAY` (and some of its debug data) captured; and Shellac's own `GOAWAY`.

pub(super) const DATA: u8 = 0;
pub(super) const HEADERS: u8 = 1;
pub(super) const PRIORITY: u8 = 2;
pub(super) const RST_STREAM: u8 = 3;
pub(super) const SETTINGS: u8 = 4;
pub(super) const PUSH_PROMISE: u8 = 5;
pub(super) const PING: u8 = 6;
pub(super) const GOAWAY: u8 = 7;
pub(super) const WINDOW_UPDATE: u8 = 8;
pub(super) const CONTINUATION: u8 = 9;

pub(super) const END_STREAM: u8 = 0x1;
pub(super) const END_HEADERS: u8 = 0x4;
pub(super) const ACK: u8 = 0x1;

/// RFC 9113 §7 error codes the watcher uses or tells apart.
pub(super) const NO_ERROR: u32 = 0x0;
pub(super) const INTERNAL_ERROR: u32 = 0x2;
pub(super) const CANCEL: u32 = 0x8;
pub(super) const ENHANCE_YOUR_CALM: u32 = 0xb;

/// The connection preface a client sends first (RFC 9113 §3.4).
pub(crate) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Debug data of an outgoing `GOAWAY` kept: enough for h2's reason words.
pub(super) const DEBUG_KEPT: usize = 32;

/// A frame header as one side saw it, with the first bytes of its payload when they matter.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Frame {
    pub(super) len: u32,
    pub(super) kind: u8,
    pub(super) flags: u8,
    pub(super) stream: u32,
    /// The error code of a `RST_STREAM` or `GOAWAY`.
    pub(super) code: u32,
    /// The start of a `GOAWAY`'s debug data (h2 names its defence there:
    /// `too_many_resets`, ...), `debug_len` bytes of it.
    pub(super) debug: [u8; DEBUG_KEPT],
    pub(super) debug_len: u8,
}

/// Follows frame boundaries in one direction of the stream.
#[derive(Debug)]
pub(super) struct Scan {
    pub(super) head: [u8; 9],
    pub(super) have: u8,
    /// Payload bytes of the current frame still to come.
    pub(super) remaining: u32,
    pub(super) frame: Frame,
    /// Payload bytes to capture for the error code (RST_STREAM: 4, GOAWAY: 8 and some of
    /// its debug data), and held.
    pub(super) want: u8,
    pub(super) cap: [u8; 8 + DEBUG_KEPT],
    pub(super) got: u8,
}

/// What `Scan::feed` reports.
pub(super) enum Event<'a> {
    /// A complete frame header (the read side acts on it).
    Head(Frame),
    /// A frame whose error code (if it has one) is known (the write side acts on it).
    Coded(Frame),
    /// Payload bytes of a SETTINGS frame (the read side checks the values).
    Settings(&'a [u8]),
}

impl Default for Scan {
    fn default() -> Scan {
        Scan {
            head: [0; 9],
            have: 0,
            remaining: 0,
            frame: Frame::default(),
            want: 0,
            cap: [0; 8 + DEBUG_KEPT],
            got: 0,
        }
    }
}

impl Scan {
    /// Whether the stream is between two frames.
    pub(super) fn at_boundary(&self) -> bool {
        self.have == 0 && self.remaining == 0
    }

    /// Payload bytes left of the current frame (0 between frames or inside a header).
    pub(super) fn left_in_frame(&self) -> usize {
        if self.have == 0 {
            self.remaining as usize
        } else {
            0
        }
    }

    /// Walks `data`, calling `on` for each frame header completed and each frame whose error
    /// code became known. Stops early (returning the bytes consumed) when `on` says so.
    pub(super) fn feed<'a>(
        &mut self,
        mut data: &'a [u8],
        mut on: impl FnMut(Event<'a>) -> bool,
    ) -> usize {
        let total = data.len();
        while !data.is_empty() {
            if self.remaining > 0 {
                let n = data.len().min(self.remaining as usize);
                if self.frame.kind == SETTINGS && !on(Event::Settings(&data[..n])) {
                    self.remaining -= n as u32;
                    return total - data.len() + n;
                }
                if self.got < self.want {
                    let take = n.min(usize::from(self.want - self.got));
                    let at = usize::from(self.got);
                    self.cap[at..at + take].copy_from_slice(&data[..take]);
                    self.got += take as u8;
                    if self.got == self.want {
                        let at = if self.frame.kind == GOAWAY { 4 } else { 0 };
                        self.frame.code = u32::from_be_bytes([
                            self.cap[at],
                            self.cap[at + 1],
                            self.cap[at + 2],
                            self.cap[at + 3],
                        ]);
                        if self.frame.kind == GOAWAY {
                            let debug = &self.cap[8..usize::from(self.want)];
                            self.frame.debug[..debug.len()].copy_from_slice(debug);
                            self.frame.debug_len = debug.len() as u8;
                        }
                        if !on(Event::Coded(self.frame)) {
                            self.remaining -= n as u32;
                            return total - data.len() + n;
                        }
                    }
                }
                self.remaining -= n as u32;
                data = &data[n..];
                continue;
            }
            let take = data.len().min(9 - usize::from(self.have));
            let at = usize::from(self.have);
            self.head[at..at + take].copy_from_slice(&data[..take]);
            self.have += take as u8;
            data = &data[take..];
            if self.have < 9 {
                break;
            }
            self.have = 0;
            let h = self.head;
            let frame = Frame {
                len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
                kind: h[3],
                flags: h[4],
                stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
                code: 0,
                debug: [0; DEBUG_KEPT],
                debug_len: 0,
            };
            self.frame = frame;
            self.remaining = frame.len;
            self.got = 0;
            self.want = match frame.kind {
                RST_STREAM if frame.len >= 4 => 4,
                GOAWAY if frame.len >= 8 => (frame.len as usize).min(8 + DEBUG_KEPT) as u8,
                _ => 0,
            };
            let go_on = on(Event::Head(frame)) && (self.want > 0 || on(Event::Coded(frame)));
            if !go_on {
                return total - data.len();
            }
        }
        total
    }
}

/// A `GOAWAY` frame: last stream `last`, error `code`, no debug data.
pub(super) fn goaway(last: u32, code: u32) -> [u8; 17] {
    let mut f = [0u8; 17];
    f[2] = 8;
    f[3] = GOAWAY;
    f[9..13].copy_from_slice(&(last & 0x7fff_ffff).to_be_bytes());
    f[13..17].copy_from_slice(&code.to_be_bytes());
    f
}
