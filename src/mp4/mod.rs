//! MP4 pseudo-streaming (nginx's `mp4` module): a file cut at `?start=SECONDS`. The `moov`
//! box (the index of every sample: times, sizes, sync samples, chunk offsets) is read, the
//! keyframe at or before the time found on the video track, every track cut at that
//! keyframe's time, and a new `moov` written whose tables start there and whose chunk
//! offsets point into the `mdat` that follows it. The answer is `ftyp`, the new `moov`, an
//! `mdat` header, then the file's bytes from the first kept sample on.
//!
//! Pure functions over bytes (no I/O): [`scan`] finds the top-level boxes in a file's first
//! bytes, [`cut`] makes the new head. A file whose `moov` comes after its `mdat` (no "fast
//! start") is cut as nginx cuts it, from random reads of the file ([`late`]): its `moov` is
//! found by the chain of box headers after the `mdat`, read, and cut the same way. Everything is bounds-checked: a box or table that does
//! not fit what holds it, an unknown version, a table whose counts disagree, is a
//! [`Bad`] file (`fuzz/fuzz_targets/mp4.rs`). What seeks hold to read `moov`s is bounded for
//! the process ([`held`]).

mod bad;
mod boxes;
mod cut;
pub mod held;
pub mod late;
mod layout;
#[doc(hidden)]
pub mod sample;
mod trak;

use std::ops::Range;

pub use self::bad::Bad;
use self::boxes::Header;
pub use self::cut::{Cut, cut, cut_span};
pub use self::layout::{Late, Layout};

/// What the first bytes of a file say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scan {
    /// Both `moov` and the `mdat` header after it are in: they can be cut.
    Ready(Layout),
    /// More bytes are needed: at least this many in all.
    More(usize),
    /// The `mdat` comes before the `moov` (not "fast start"): the file cannot be cut as it
    /// streams; its `moov` is found after the mdat with random access ([`late`]).
    MoovAfterMdat(Late),
    Bad(Bad),
}

/// Reads the top-level boxes of `prefix` (a file's first bytes) up to the `moov` and the
/// `mdat` header after it; a `moov` (or anything before it) beyond `max` bytes is [`Bad`].
pub fn scan(prefix: &[u8], max: usize) -> Scan {
    let mut at = 0usize;
    let mut ftyp = None;
    let mut moov: Option<Range<usize>> = None;
    loop {
        let header = match Header::read(&prefix[at.min(prefix.len())..]) {
            Ok(Some(h)) => h,
            Ok(None) => return more(at + 16, max),
            Err(b) => return Scan::Bad(b),
        };
        let Some(size) = header.size else {
            // To the end of the file: only the mdat may say that.
            if &header.kind == b"mdat" {
                return match moov {
                    Some(m) => Scan::Ready(Layout {
                        ftyp,
                        moov: m,
                        mdat_data: (at + header.len) as u64,
                        mdat_end: None,
                    }),
                    None => Scan::MoovAfterMdat(Late {
                        ftyp,
                        mdat_data: (at + header.len) as u64,
                        mdat_end: None,
                    }),
                };
            }
            return Scan::Bad(Bad("a box before the moov runs to the end of the file"));
        };
        match &header.kind {
            b"mdat" => {
                return match moov {
                    Some(m) => Scan::Ready(Layout {
                        ftyp,
                        moov: m,
                        mdat_data: (at + header.len) as u64,
                        mdat_end: Some(at as u64 + size),
                    }),
                    None => Scan::MoovAfterMdat(Late {
                        ftyp,
                        mdat_data: (at + header.len) as u64,
                        mdat_end: Some(at as u64 + size),
                    }),
                };
            }
            b"moof" | b"mvex" => return Scan::Bad(Bad("a fragmented mp4")),
            _ => {}
        }
        let end = match usize::try_from(size).ok().and_then(|s| at.checked_add(s)) {
            Some(e) if e <= max => e,
            _ => return Scan::Bad(Bad("the moov, or what is before it, is too large")),
        };
        match &header.kind {
            b"ftyp" if end <= prefix.len() => ftyp = Some(at..end),
            b"moov" if end <= prefix.len() => moov = Some(at..end),
            b"ftyp" | b"moov" => return more(end, max),
            _ => {}
        }
        at = end;
    }
}

fn more(need: usize, max: usize) -> Scan {
    if need > max {
        Scan::Bad(Bad("the moov, or what is before it, is too large"))
    } else {
        Scan::More(need)
    }
}

#[cfg(test)]
mod tests;
