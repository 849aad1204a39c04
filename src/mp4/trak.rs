//! One track's sample tables (`stts` times, `ctts` composition offsets, `stss` sync samples,
//! `stsc` samples per chunk, `stsz` sizes, `stco` / `co64` chunk offsets): read, asked where
//! a time falls, and written again without the samples before a cut.

use super::bad::Bad;
use super::boxes::{self, Boxes, MDHD, entries, u32_at, u64_at};

mod write;

/// A track of a `moov`, its tables read.
pub(super) struct Trak<'a> {
    payload: &'a [u8],
    pub timescale: u32,
    /// (sample count, duration of each).
    stts: Vec<(u32, u32)>,
    /// (sample count, offset of each).
    ctts: Option<Vec<(u32, u32)>>,
    /// Sync samples, numbered from 1, ascending.
    stss: Option<Vec<u32>>,
    /// (first chunk from 1, samples per chunk, description index).
    stsc: Vec<(u32, u32, u32)>,
    /// One size for every sample, or 0 and `sizes`.
    size: u32,
    count: u32,
    sizes: Vec<u32>,
    chunks: Vec<u64>,
    co64: bool,
}

/// Where a track is cut: its first kept sample, the chunk holding it (from 0), how many of
/// that chunk's samples go before it, and where its data starts in the file; its end: the
/// first sample no longer kept, the chunk holding the last kept one and how many of that
/// chunk's samples are kept counted from the chunk's first, and where the kept data ends.
pub(super) struct TrackCut {
    first: u32,
    chunk: usize,
    within: u32,
    pub data_start: u64,
    last: u32,
    end_chunk: usize,
    end_keep: u32,
    pub data_end: u64,
}

impl TrackCut {
    /// No sample kept ([`Trak::cut_none`]): its `data_start` and `data_end` mean nothing.
    pub fn is_empty(&self) -> bool {
        self.first >= self.last
    }
}

/// Where a sample is: its chunk (from 0), how many of the chunk's samples go before it, its
/// offset in the file.
struct Place {
    chunk: usize,
    within: u32,
    offset: u64,
}

/// The payload of the only child `kind` of a container.
fn child<'a>(payload: &'a [u8], kind: &[u8; 4]) -> Result<Option<&'a [u8]>, Bad> {
    for b in Boxes::new(payload) {
        let (k, p) = b?;
        if &k == kind {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

fn pairs(p: &[u8]) -> Result<Vec<(u32, u32)>, Bad> {
    let n = entries(p, 4, 8)?;
    (0..n)
        .map(|i| Ok((u32_at(p, 8 + i * 8)?, u32_at(p, 12 + i * 8)?)))
        .collect()
}

impl<'a> Trak<'a> {
    pub fn read(payload: &'a [u8]) -> Result<Trak<'a>, Bad> {
        let mdia = child(payload, b"mdia")?.ok_or(Bad("a trak without mdia"))?;
        let mdhd = child(mdia, b"mdhd")?.ok_or(Bad("no mdhd"))?;
        let timescale = boxes::timescale(mdhd, &MDHD)?;
        let minf = child(mdia, b"minf")?.ok_or(Bad("no minf"))?;
        let stbl = child(minf, b"stbl")?.ok_or(Bad("no stbl"))?;
        let mut t = Trak {
            payload,
            timescale,
            stts: Vec::new(),
            ctts: None,
            stss: None,
            stsc: Vec::new(),
            size: 0,
            count: 0,
            sizes: Vec::new(),
            chunks: Vec::new(),
            co64: false,
        };
        let (mut stts, mut stsc, mut stsz, mut stco) = (false, false, false, false);
        for b in Boxes::new(stbl) {
            let (kind, p) = b?;
            match &kind {
                b"stts" => {
                    t.stts = pairs(p)?;
                    stts = true;
                }
                b"ctts" => t.ctts = Some(pairs(p)?),
                b"stss" => {
                    let n = entries(p, 4, 4)?;
                    let s = (0..n)
                        .map(|i| u32_at(p, 8 + i * 4))
                        .collect::<Result<Vec<u32>, Bad>>()?;
                    if s.windows(2).any(|w| w[0] >= w[1]) || s.first() == Some(&0) {
                        return Err(Bad("sync samples out of order"));
                    }
                    t.stss = Some(s);
                }
                b"stsc" => {
                    let n = entries(p, 4, 12)?;
                    t.stsc = (0..n)
                        .map(|i| {
                            Ok((
                                u32_at(p, 8 + i * 12)?,
                                u32_at(p, 12 + i * 12)?,
                                u32_at(p, 16 + i * 12)?,
                            ))
                        })
                        .collect::<Result<_, Bad>>()?;
                    stsc = true;
                }
                b"stsz" => {
                    t.size = u32_at(p, 4)?;
                    t.count = u32_at(p, 8)?;
                    if t.size == 0 {
                        let n = entries(p, 8, 4)?;
                        if n != t.count as usize {
                            return Err(Bad("stsz's count and table disagree"));
                        }
                        t.sizes = (0..n)
                            .map(|i| u32_at(p, 12 + i * 4))
                            .collect::<Result<_, Bad>>()?;
                    }
                    stsz = true;
                }
                b"stz2" => return Err(Bad("compact sample sizes (stz2)")),
                b"stco" => {
                    let n = entries(p, 4, 4)?;
                    t.chunks = (0..n)
                        .map(|i| u32_at(p, 8 + i * 4).map(u64::from))
                        .collect::<Result<_, Bad>>()?;
                    stco = true;
                }
                b"co64" => {
                    let n = entries(p, 4, 8)?;
                    t.chunks = (0..n)
                        .map(|i| u64_at(p, 8 + i * 8))
                        .collect::<Result<_, Bad>>()?;
                    t.co64 = true;
                    stco = true;
                }
                _ => {}
            }
        }
        if !(stts && stsc && stsz && stco) {
            return Err(Bad("a sample table is missing"));
        }
        let timed: u64 = t.stts.iter().map(|&(n, _)| u64::from(n)).sum();
        if timed != u64::from(t.count) {
            return Err(Bad("stts and stsz count different samples"));
        }
        if t.stsc.first().is_some_and(|r| r.0 != 1)
            || t.stsc.windows(2).any(|w| w[0].0 >= w[1].0)
            || t.stsc.iter().any(|r| r.1 == 0)
            || t.stsc.last().is_some_and(|r| r.0 as usize > t.chunks.len())
        {
            return Err(Bad("stsc out of order"));
        }
        Ok(t)
    }

    pub fn has_sync(&self) -> bool {
        self.stss.is_some()
    }

    pub fn samples(&self) -> u32 {
        self.count
    }

    /// `seconds` in this track's timescale.
    pub fn units_of(&self, seconds: f64) -> u64 {
        (seconds * f64::from(self.timescale)) as u64
    }

    /// The sample playing at `units` (from 0; `samples()` when past the end).
    fn sample_at(&self, units: u64) -> u32 {
        let (mut t, mut s) = (0u64, 0u64);
        for &(n, d) in &self.stts {
            let span = u64::from(n) * u64::from(d);
            if d > 0 && units < t + span {
                return (s + (units - t) / u64::from(d)) as u32;
            }
            t += span;
            s += u64::from(n);
        }
        self.count
    }

    /// The decode time of sample `sample` (from 0), in the track's timescale.
    pub fn time_of(&self, sample: u32) -> u64 {
        let (mut t, mut left) = (0u64, u64::from(sample));
        for &(n, d) in &self.stts {
            let k = left.min(u64::from(n));
            t += k * u64::from(d);
            left -= k;
            if left == 0 {
                break;
            }
        }
        t
    }

    /// The sync sample at or before the sample playing at `units` (from 0; the first sample
    /// when the time is before the first sync sample); `None` when the track ends before.
    pub fn keyframe_at_or_before(&self, units: u64) -> Option<u32> {
        let sample = self.sample_at(units);
        if sample >= self.count {
            return None;
        }
        let stss = self.stss.as_deref().unwrap_or(&[]);
        let at = stss.partition_point(|&s| s <= sample + 1);
        Some(at.checked_sub(1).map_or(0, |i| stss[i] - 1))
    }

    /// The first sample whose decode time is at or after `time / scale` seconds.
    pub fn first_at_or_after(&self, time: u64, scale: u32) -> u32 {
        // Sample times t (this track's units) compared as t * scale >= time * timescale.
        let target = u128::from(time) * u128::from(self.timescale);
        let ks = u128::from(scale);
        let (mut t, mut s) = (0u128, 0u64);
        for &(n, d) in &self.stts {
            let (n, d) = (u128::from(n), u128::from(d));
            if t * ks >= target {
                return s as u32;
            }
            let last = t + n.saturating_sub(1) * d;
            if n > 0 && d > 0 && last * ks >= target {
                let k = (target - t * ks).div_ceil(d * ks);
                return (u128::from(s) + k) as u32;
            }
            t += n * d;
            s += n as u64;
        }
        self.count
    }

    fn size_of(&self, sample: u32) -> u64 {
        if self.size != 0 {
            u64::from(self.size)
        } else {
            self.sizes
                .get(sample as usize)
                .copied()
                .map_or(0, u64::from)
        }
    }

    /// Where sample `sample` is.
    fn place(&self, sample: u32) -> Result<Place, Bad> {
        let chunks = self.chunks.len() as u64;
        let mut before = 0u64;
        for (i, &(f, spc, _)) in self.stsc.iter().enumerate() {
            let next = self.stsc.get(i + 1).map_or(chunks + 1, |r| u64::from(r.0));
            let run = next.saturating_sub(u64::from(f)) * u64::from(spc);
            if u64::from(sample) < before + run {
                let into = u64::from(sample) - before;
                let chunk = u64::from(f) - 1 + into / u64::from(spc);
                let within = (into % u64::from(spc)) as u32;
                let base = *self
                    .chunks
                    .get(chunk as usize)
                    .ok_or(Bad("a chunk without an offset"))?;
                let skip: u64 = (sample - within..sample).map(|s| self.size_of(s)).sum();
                return Ok(Place {
                    chunk: chunk as usize,
                    within,
                    offset: base + skip,
                });
            }
            before += run;
        }
        Err(Bad("stsc holds fewer samples than stsz"))
    }

    /// The cut of a track that ends before the start (a short track of a longer movie, as
    /// nginx): no sample kept, its tables written empty, no media data of its own.
    pub fn cut_none(&self) -> TrackCut {
        TrackCut {
            first: self.count,
            chunk: 0,
            within: 0,
            data_start: 0,
            last: self.count,
            end_chunk: 0,
            end_keep: 0,
            data_end: 0,
        }
    }

    /// Where the track is cut to keep samples `first..last` (`first < last <= samples()`).
    pub fn cut(&self, first: u32, last: u32) -> Result<TrackCut, Bad> {
        if first >= last || last > self.count {
            return Err(Bad("no sample between the start and the end"));
        }
        let start = self.place(first)?;
        let end = self.place(last - 1)?;
        Ok(TrackCut {
            first,
            chunk: start.chunk,
            within: start.within,
            data_start: start.offset,
            last,
            end_chunk: end.chunk,
            end_keep: end.within + 1,
            data_end: end.offset + self.size_of(last - 1),
        })
    }

    /// The samples per chunk of chunk `chunk` (from 0), and its description index.
    fn chunk_run(&self, chunk: usize) -> (u32, u32) {
        let number = chunk as u32 + 1;
        self.stsc
            .iter()
            .rev()
            .find(|r| r.0 <= number)
            .map_or((0, 1), |r| (r.1, r.2))
    }
}

#[cfg(test)]
impl Trak<'_> {
    /// Every sample's (offset in the file, size), from the tables.
    pub fn sample_ranges(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut sample = 0u32;
        for (c, &offset) in self.chunks.iter().enumerate() {
            let chunk = c as u32 + 1;
            let run = self
                .stsc
                .iter()
                .rev()
                .find(|r| r.0 <= chunk)
                .map_or(0, |r| r.1);
            let mut at = offset;
            for _ in 0..run {
                let size = self.size_of(sample);
                out.push((at, size));
                at += size;
                sample += 1;
            }
        }
        out
    }
}
