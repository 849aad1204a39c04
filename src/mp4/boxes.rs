//! ISO BMFF boxes: headers read and written, the children of a container walked, the big-
//! endian fields of the tables read with bounds checks, and the durations of `mvhd`, `tkhd`
//! and `mdhd` shortened by the time cut off.

use super::bad::Bad;

/// A box header: its type, the header's length (8, or 16 with a 64-bit size) and the whole
/// box's size (`None`: to the end of what holds it).
#[derive(Debug, Clone, Copy)]
pub(super) struct Header {
    pub kind: [u8; 4],
    pub len: usize,
    pub size: Option<u64>,
}

impl Header {
    /// The header at the start of `buf`; `Ok(None)` when `buf` is too short to hold it.
    pub fn read(buf: &[u8]) -> Result<Option<Header>, Bad> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let size = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let kind = [buf[4], buf[5], buf[6], buf[7]];
        match size {
            0 => Ok(Some(Header {
                kind,
                len: 8,
                size: None,
            })),
            1 => {
                if buf.len() < 16 {
                    return Ok(None);
                }
                let large = u64_at(buf, 8)?;
                if large < 16 {
                    return Err(Bad("a box smaller than its header"));
                }
                Ok(Some(Header {
                    kind,
                    len: 16,
                    size: Some(large),
                }))
            }
            2..=7 => Err(Bad("a box smaller than its header")),
            n => Ok(Some(Header {
                kind,
                len: 8,
                size: Some(u64::from(n)),
            })),
        }
    }
}

/// The boxes of a container's payload, each as its type and payload.
pub(super) struct Boxes<'a> {
    buf: &'a [u8],
    failed: bool,
}

impl<'a> Boxes<'a> {
    pub fn new(buf: &'a [u8]) -> Boxes<'a> {
        Boxes { buf, failed: false }
    }
}

impl<'a> Iterator for Boxes<'a> {
    type Item = Result<([u8; 4], &'a [u8]), Bad>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        let header = match Header::read(self.buf) {
            Ok(Some(h)) => h,
            Ok(None) => {
                self.failed = true;
                return Some(Err(Bad("a box header cut short")));
            }
            Err(b) => {
                self.failed = true;
                return Some(Err(b));
            }
        };
        let size = match header.size {
            None => self.buf.len(),
            Some(s) => match usize::try_from(s) {
                Ok(s) if s <= self.buf.len() => s,
                _ => {
                    self.failed = true;
                    return Some(Err(Bad("a box larger than what holds it")));
                }
            },
        };
        let payload = &self.buf[header.len..size];
        self.buf = &self.buf[size..];
        Some(Ok((header.kind, payload)))
    }
}

pub(super) fn u32_at(buf: &[u8], at: usize) -> Result<u32, Bad> {
    let b = buf
        .get(at..at.checked_add(4).ok_or(Bad("short"))?)
        .ok_or(Bad("a table cut short"))?;
    Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

pub(super) fn u64_at(buf: &[u8], at: usize) -> Result<u64, Bad> {
    let b = buf
        .get(at..at.checked_add(8).ok_or(Bad("short"))?)
        .ok_or(Bad("a table cut short"))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Ok(u64::from_be_bytes(a))
}

/// A full box's table: its entry count (at byte 4, after version and flags, or at `at`),
/// checked against the bytes there are for `entry` bytes each.
pub(super) fn entries(payload: &[u8], at: usize, entry: usize) -> Result<usize, Bad> {
    let n = u32_at(payload, at)? as usize;
    let room = payload.len().saturating_sub(at + 4) / entry;
    if n > room {
        return Err(Bad("a table longer than its box"));
    }
    Ok(n)
}

pub(super) fn write_header(out: &mut Vec<u8>, kind: &[u8; 4], size: u64) {
    match u32::try_from(size) {
        Ok(s) => {
            out.extend_from_slice(&s.to_be_bytes());
            out.extend_from_slice(kind);
        }
        Err(_) => {
            out.extend_from_slice(&1u32.to_be_bytes());
            out.extend_from_slice(kind);
            out.extend_from_slice(&(size + 8).to_be_bytes());
        }
    }
}

/// A box of `kind` around `payload`.
pub(super) fn write_box(out: &mut Vec<u8>, kind: &[u8; 4], payload: &[u8]) {
    write_header(out, kind, payload.len() as u64 + 8);
    out.extend_from_slice(payload);
}

/// Where a header box keeps its timescale (if it has one) and duration, by version.
pub(super) struct Durations {
    /// (timescale, duration) offsets for version 0 and 1; timescale `None` for `tkhd`, whose
    /// duration is in the movie's timescale.
    v0: (Option<usize>, usize),
    v1: (Option<usize>, usize),
}

pub(super) const MVHD: Durations = Durations {
    v0: (Some(12), 16),
    v1: (Some(20), 24),
};
pub(super) const MDHD: Durations = MVHD;
pub(super) const TKHD: Durations = Durations {
    v0: (None, 20),
    v1: (None, 28),
};

/// The box's timescale (`mvhd`, `mdhd`).
pub(super) fn timescale(payload: &[u8], d: &Durations) -> Result<u32, Bad> {
    let (scale, _) = match payload.first() {
        Some(0) => d.v0,
        Some(1) => d.v1,
        _ => return Err(Bad("an unknown header version")),
    };
    let scale = u32_at(payload, scale.ok_or(Bad("no timescale"))?)?;
    if scale == 0 {
        return Err(Bad("a timescale of 0"));
    }
    Ok(scale)
}

/// What a cut does to durations: `start` seconds go, and at most `keep` seconds stay (an
/// `end`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Trim {
    pub start: f64,
    pub keep: Option<f64>,
}

/// Takes `span.start` off the duration of the header box `payload` (its own timescale, or
/// `movie` for `tkhd`), and keeps at most `span.keep`. An unknown duration (all ones) is
/// left.
pub(super) fn shorten_duration(
    payload: &mut [u8],
    d: &Durations,
    span: Trim,
    movie: Option<u32>,
) -> Result<(), Bad> {
    let seconds = span.start;
    let (v1, (_, at)) = match payload.first() {
        Some(0) => (false, d.v0),
        Some(1) => (true, d.v1),
        _ => return Err(Bad("an unknown header version")),
    };
    let scale = match movie {
        Some(m) => m,
        None => timescale(payload, d)?,
    };
    let cut = (seconds * f64::from(scale)) as u64;
    let most = span
        .keep
        .map_or(u64::MAX, |k| (k * f64::from(scale)) as u64);
    if v1 {
        let old = u64_at(payload, at)?;
        if old != u64::MAX {
            let new = old.saturating_sub(cut).min(most);
            payload[at..at + 8].copy_from_slice(&new.to_be_bytes());
        }
    } else {
        let old = u32_at(payload, at)?;
        if old != u32::MAX {
            let new = u64::from(old).saturating_sub(cut).min(most) as u32;
            payload[at..at + 4].copy_from_slice(&new.to_be_bytes());
        }
    }
    Ok(())
}
