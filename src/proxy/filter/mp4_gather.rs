//! An MP4 seek on a file whose `moov` comes after its `mdat` while its body streams (the
//! request that fetches and stores it, a waiter, a passed request): the body is held as it
//! comes — the chunks themselves, shared with a fill that stores them — until the box
//! headers after the `mdat` lead to the whole `moov`, everything up to its end at most
//! `mp4_max_moov_size` (the bound on what comes before a fast-start file's `moov`), then cut
//! from what is held, as nginx reads the `moov` before it answers. A `moov` whose end is past
//! that bound is not cut however the body's chunks come (one chunk may hold the whole file),
//! as from a stored copy: a miss and the hits after it answer alike.

use bytes::Bytes;

use crate::mp4::Late;
use crate::mp4::late::After;

/// The body held while the `moov` after the `mdat` is looked for.
pub(super) struct Gathering {
    pub late: Late,
    /// The first bytes (the `ftyp`, the `mdat` header).
    pub first: Bytes,
    /// Every chunk from the body's start, `first` included.
    chunks: Vec<Bytes>,
    have: u64,
    /// The next box header after the `mdat`, and how many were passed.
    at: u64,
    boxes: usize,
    moov: Option<(u64, u64)>,
}

/// What the held bytes say so far.
pub(super) enum Gathered {
    More,
    Moov(Vec<u8>),
    Bad(&'static str),
}

impl Gathering {
    /// `held`: the first bytes; `at`: where the mdat ends (`Late::after_mdat`).
    pub fn new(held: Vec<u8>, late: Late, at: u64) -> Gathering {
        let first = Bytes::from(held);
        Gathering {
            late,
            have: first.len() as u64,
            chunks: vec![first.clone()],
            first,
            at,
            boxes: 0,
            moov: None,
        }
    }

    pub fn push(&mut self, chunk: Bytes) {
        self.have += chunk.len() as u64;
        self.chunks.push(chunk);
    }

    /// Bytes held.
    pub fn held(&self) -> u64 {
        self.have
    }

    /// Walks the box headers after the `mdat` as far as the held bytes go (`len`: the body's
    /// length, `u64::MAX` when unknown; `max`: the bound on the `moov`).
    pub fn step(&mut self, len: u64, max: usize) -> Gathered {
        loop {
            if let Some((at, size)) = self.moov {
                if self.have < at + size {
                    return Gathered::More;
                }
                return Gathered::Moov(self.copy(at, at + size));
            }
            if self.at >= len || self.boxes >= Late::MAX_BOXES {
                return Gathered::Bad("no moov after the mdat");
            }
            let need = self.at.saturating_add(16).min(len);
            if self.have < need {
                return Gathered::More;
            }
            let head = self.copy(self.at, need);
            match Late::next(self.at, &head, len, max) {
                // However the body comes in chunks: as from a stored copy (`Late::find_moov_within`).
                Ok(After::Moov(at, size)) if at.saturating_add(size) > max as u64 => {
                    return Gathered::Bad(crate::mp4::late::PAST_REACH);
                }
                Ok(After::Moov(at, size)) => self.moov = Some((at, size)),
                Ok(After::Next(next)) => {
                    self.at = next;
                    self.boxes += 1;
                }
                Err(b) => return Gathered::Bad(b.0),
            }
        }
    }

    /// The held bytes `from .. to`, copied.
    fn copy(&self, from: u64, to: u64) -> Vec<u8> {
        self.range(from, to)
            .iter()
            .flat_map(|b| b.iter().copied())
            .collect()
    }

    /// The held bytes `from .. to` as pieces of the chunks (no copy).
    pub fn range(&self, from: u64, to: u64) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut pos = 0u64;
        for c in &self.chunks {
            let end = pos + c.len() as u64;
            let (lo, hi) = (from.max(pos), to.min(end));
            if lo < hi {
                out.push(c.slice((lo - pos) as usize..(hi - pos) as usize));
            }
            pos = end;
        }
        out
    }

    /// Everything held, in order.
    pub fn into_chunks(self) -> Vec<Bytes> {
        self.chunks
    }
}
