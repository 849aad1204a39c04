//! Cutting a file at a time: the keyframe at or before the start found on the video
//! tracks, every track cut there (and before an end), and the new head written: `ftyp`, a
//! `moov` whose tables start at the cut and whose chunk offsets point into the `mdat` header
//! that follows it.

use super::bad::Bad;
use super::boxes::{self, Boxes, Header, write_header};
use super::layout::Layout;
use super::trak::{self, Trak};

/// A file cut at a time: `head` (ftyp, the new moov, an mdat header), then the file's bytes
/// `from..to` (`to`: `None` to the end of the file). Without an end, what follows the mdat
/// (`to`) may be sent too: it is boxes after the mdat; with one, nothing after `to` is.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    pub head: Vec<u8>,
    pub from: u64,
    pub to: Option<u64>,
    /// The time the answer starts at (the keyframe's), in seconds.
    pub start: f64,
}

/// Cuts the file whose first bytes are `prefix` (laid out as `layout` says) at `start`
/// seconds. `Ok(None)`: the time is at or before the first keyframe, the file is sent as it
/// is.
pub fn cut(prefix: &[u8], layout: &Layout, start: f64) -> Result<Option<Cut>, Bad> {
    cut_span(prefix, layout, start, None)
}

/// Cuts the file at `start` seconds (as [`cut`]; 0: from the beginning) and, with `end`, ends
/// it before the first sample of each track at or after `end` seconds (nginx's `end=`; each
/// track keeps at least one sample). An `end` at or before the start is no end.
pub fn cut_span(
    prefix: &[u8],
    layout: &Layout,
    start: f64,
    end: Option<f64>,
) -> Result<Option<Cut>, Bad> {
    if span(start, end).is_none() {
        return Ok(None);
    }
    let moov = prefix.get(layout.moov.clone()).ok_or(Bad("short moov"))?;
    let ftyp = match &layout.ftyp {
        Some(r) => prefix.get(r.clone()).ok_or(Bad("short ftyp"))?,
        None => &[],
    };
    cut_parts(ftyp, moov, (layout.mdat_data, layout.mdat_end), start, end)
}

/// Cuts a file given its `ftyp` and `moov` boxes and where its `mdat`'s data is (from, to;
/// `None`: to the end of the file), wherever those boxes are in it: before the `mdat` (the
/// first bytes, [`cut_span`]) or after it ([`late`](super::late)).
pub fn cut_parts(
    ftyp: &[u8],
    moov: &[u8],
    mdat: (u64, Option<u64>),
    start: f64,
    end: Option<f64>,
) -> Result<Option<Cut>, Bad> {
    let Some((start, end)) = span(start, end) else {
        return Ok(None);
    };
    let moov = read_moov(moov)?;
    let (key_time, key_scale) = key_time(&moov.traks, start)?;
    if key_time == 0 && end.is_none() {
        return Ok(None);
    }
    let cuts = track_cuts(&moov.traks, (key_time, key_scale), end)?;
    let (from, to) = data_span(&cuts, mdat, end)?;
    let seconds = key_time as f64 / f64::from(key_scale.max(1));
    let span = boxes::Trim {
        start: seconds,
        keep: end.map(|e| e - seconds),
    };
    let head = write_head(ftyp, &moov, &cuts, span, (from, to))?;
    Ok(Some(Cut {
        head,
        from,
        to,
        start: seconds,
    }))
}

/// The start (0: from the beginning) and the end of a cut; `None`: nothing to cut (no start,
/// and no end after it).
fn span(start: f64, end: Option<f64>) -> Option<(f64, Option<f64>)> {
    let start = if start.is_finite() && start > 0.0 {
        start
    } else {
        0.0
    };
    let end = end.filter(|e| e.is_finite() && *e > start);
    (start > 0.0 || end.is_some()).then_some((start, end))
}

/// A read `moov`: its children (its body), its `mvhd`, its tracks.
struct Moov<'a> {
    body: &'a [u8],
    mvhd: &'a [u8],
    traks: Vec<Trak<'a>>,
}

/// A `moov`'s children (its body), its `mvhd` and its tracks read.
fn read_moov(moov: &[u8]) -> Result<Moov<'_>, Bad> {
    let header = Header::read(moov)?.ok_or(Bad("short moov"))?;
    let body = &moov[header.len..];
    let mut traks = Vec::new();
    let mut mvhd = None;
    for child in Boxes::new(body) {
        let (kind, payload) = child?;
        match &kind {
            b"mvhd" => mvhd = Some(payload),
            b"trak" => traks.push(Trak::read(payload)?),
            b"mvex" => return Err(Bad("a fragmented mp4")),
            _ => {}
        }
    }
    let mvhd = mvhd.ok_or(Bad("no mvhd"))?;
    if traks.is_empty() {
        return Err(Bad("no track"));
    }
    Ok(Moov { body, mvhd, traks })
}

/// The keyframe at or before `start` on the tracks that have sync samples (video): the
/// earliest of them, as (time, timescale). Every track is cut at that time, so sound and
/// picture stay together. A video track that ends before `start` has no say (it is left
/// empty, [`track_cuts`]); a `start` past the end of every video track cannot be cut.
/// Without a video track: `start` on the first track.
fn key_time(traks: &[Trak<'_>], start: f64) -> Result<(u64, u32), Bad> {
    let mut key: Option<(u64, u32)> = None;
    let mut video = false;
    for t in traks.iter().filter(|t| t.has_sync() && start > 0.0) {
        video = true;
        let units = t.units_of(start);
        let Some(sample) = t.keyframe_at_or_before(units) else {
            continue;
        };
        let time = t.time_of(sample);
        // Compared as fractions of a second: time / timescale.
        if key.is_none_or(|(kt, ks)| {
            u128::from(time) * u128::from(ks) < u128::from(kt) * u128::from(t.timescale)
        }) {
            key = Some((time, t.timescale));
        }
    }
    let traks0 = traks.first().ok_or(Bad("no track"))?;
    match key {
        Some(k) => Ok(k),
        None if video => Err(Bad("the start is past the end of the video")),
        None => Ok((traks0.units_of(start), traks0.timescale)),
    }
}

/// Each track cut from its first sample at or after the key time, up to (not with) its
/// first sample at or after `end`. A track that ends before the key time is kept empty, as
/// nginx does (a movie's short track: the seek is into the longer ones); a key time past
/// the end of every track cannot be cut.
fn track_cuts(
    traks: &[Trak<'_>],
    (key_time, key_scale): (u64, u32),
    end: Option<f64>,
) -> Result<Vec<trak::TrackCut>, Bad> {
    let mut cuts = Vec::with_capacity(traks.len());
    for t in traks {
        let first = t.first_at_or_after(key_time, key_scale);
        if first >= t.samples() {
            cuts.push(t.cut_none());
            continue;
        }
        let last = match end {
            Some(e) => t
                .first_at_or_after(t.units_of(e), t.timescale)
                .clamp(first + 1, t.samples()),
            None => t.samples(),
        };
        cuts.push(t.cut(first, last)?);
    }
    if cuts.iter().all(trak::TrackCut::is_empty) {
        return Err(Bad("the start is past the end of every track"));
    }
    Ok(cuts)
}

/// Where the kept media data is in the file: from the first kept sample of any track; with
/// an end, to the end of the last kept sample of any track, else to the mdat's end.
fn data_span(
    cuts: &[trak::TrackCut],
    (mdat_data, mdat_end): (u64, Option<u64>),
    end: Option<f64>,
) -> Result<(u64, Option<u64>), Bad> {
    let kept = || cuts.iter().filter(|c| !c.is_empty());
    let from = kept().map(|c| c.data_start).min().ok_or(Bad("no track"))?;
    if from < mdat_data || mdat_end.is_some_and(|e| from > e) {
        return Err(Bad("a chunk offset outside the mdat"));
    }
    let to = match end {
        Some(_) => {
            let to = kept().map(|c| c.data_end).max().unwrap_or(from);
            if mdat_end.is_some_and(|e| to > e) {
                return Err(Bad("a chunk offset outside the mdat"));
            }
            Some(to)
        }
        None => mdat_end,
    };
    Ok((from, to))
}

/// The answer's head: `ftyp`, the new moov (its offsets relative to where the data will
/// start), the mdat header. The moov's size does not depend on the offsets' values, so it is
/// written twice: once to measure, once for real.
fn write_head(
    ftyp: &[u8],
    m: &Moov<'_>,
    cuts: &[trak::TrackCut],
    span: boxes::Trim,
    (from, to): (u64, Option<u64>),
) -> Result<Vec<u8>, Bad> {
    let mdat_len = to.map(|e| e - from);
    let mdat_header = mdat_header(mdat_len);
    let draft = write_moov(m.body, &m.traks, cuts, m.mvhd, span, 0, from)?;
    let data_at = (ftyp.len() + draft.len() + mdat_header.len()) as u64;
    let moov = write_moov(m.body, &m.traks, cuts, m.mvhd, span, data_at, from)?;
    if moov.len() != draft.len() {
        return Err(Bad("the moov changed size"));
    }
    let mut head = Vec::with_capacity(data_at as usize);
    head.extend_from_slice(ftyp);
    head.extend_from_slice(&moov);
    head.extend_from_slice(&mdat_header);
    Ok(head)
}

/// An mdat header for `len` data bytes (`None`: to the end of the file).
fn mdat_header(len: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    match len {
        Some(n) if n + 8 <= u64::from(u32::MAX) => write_header(&mut out, b"mdat", n + 8),
        Some(n) => {
            out.extend_from_slice(&1u32.to_be_bytes());
            out.extend_from_slice(b"mdat");
            out.extend_from_slice(&(n + 16).to_be_bytes());
        }
        None => {
            out.extend_from_slice(&0u32.to_be_bytes());
            out.extend_from_slice(b"mdat");
        }
    }
    out
}

/// The new moov: its boxes in their order, `mvhd`'s duration shortened, each `trak` cut,
/// chunk offsets moved from `from` (in the file) to `data_at` (in the answer).
fn write_moov(
    body: &[u8],
    traks: &[Trak<'_>],
    cuts: &[trak::TrackCut],
    mvhd: &[u8],
    seconds: boxes::Trim,
    data_at: u64,
    from: u64,
) -> Result<Vec<u8>, Bad> {
    let movie = boxes::timescale(mvhd, &boxes::MVHD)?;
    let mut inner = Vec::new();
    let mut next = 0;
    for child in Boxes::new(body) {
        let (kind, payload) = child?;
        match &kind {
            b"mvhd" => {
                let mut m = mvhd.to_vec();
                boxes::shorten_duration(&mut m, &boxes::MVHD, seconds, None)?;
                boxes::write_box(&mut inner, b"mvhd", &m);
            }
            b"trak" => {
                let (t, c) = (
                    traks.get(next).ok_or(Bad("tracks"))?,
                    cuts.get(next).ok_or(Bad("tracks"))?,
                );
                next += 1;
                let trak = t.write(c, seconds, movie, data_at, from)?;
                boxes::write_box(&mut inner, b"trak", &trak);
            }
            _ => boxes::write_box(&mut inner, &kind, payload),
        }
    }
    let mut out = Vec::with_capacity(inner.len() + 8);
    boxes::write_box(&mut out, b"moov", &inner);
    Ok(out)
}
