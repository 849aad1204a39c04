//! Writing a cut track: its payload again with the sample tables (`stts`, `ctts`, `stss`,
//! `stsz`, `stsc`, `stco` / `co64`) starting at the cut's first sample and ending after its
//! last, chunk offsets moved to where the kept data is in the answer.

use super::{TrackCut, Trak};
use crate::mp4::bad::Bad;
use crate::mp4::boxes::{self, Boxes, MDHD, TKHD, Trim, write_box};

impl Trak<'_> {
    /// The track's payload again, its tables starting at `cut`, chunk offsets moved from
    /// `from` (in the file) to `data_at` (in the answer); its `edts` (edit list, of the old
    /// timeline) left out, as nginx does.
    pub fn write(
        &self,
        cut: &TrackCut,
        seconds: Trim,
        movie: u32,
        data_at: u64,
        from: u64,
    ) -> Result<Vec<u8>, Bad> {
        let mut out = Vec::with_capacity(self.payload.len());
        for b in Boxes::new(self.payload) {
            let (kind, p) = b?;
            match &kind {
                b"edts" => {}
                b"tkhd" => {
                    let mut h = p.to_vec();
                    boxes::shorten_duration(&mut h, &TKHD, seconds, Some(movie))?;
                    write_box(&mut out, b"tkhd", &h);
                }
                b"mdia" => {
                    let mdia = self.write_mdia(p, cut, seconds, data_at, from)?;
                    write_box(&mut out, b"mdia", &mdia);
                }
                _ => write_box(&mut out, &kind, p),
            }
        }
        Ok(out)
    }

    fn write_mdia(
        &self,
        mdia: &[u8],
        cut: &TrackCut,
        seconds: Trim,
        data_at: u64,
        from: u64,
    ) -> Result<Vec<u8>, Bad> {
        let mut out = Vec::with_capacity(mdia.len());
        for b in Boxes::new(mdia) {
            let (kind, p) = b?;
            match &kind {
                b"mdhd" => {
                    let mut h = p.to_vec();
                    boxes::shorten_duration(&mut h, &MDHD, seconds, None)?;
                    write_box(&mut out, b"mdhd", &h);
                }
                b"minf" => {
                    let mut minf = Vec::with_capacity(p.len());
                    for b in Boxes::new(p) {
                        let (kind, q) = b?;
                        if &kind == b"stbl" {
                            let stbl = self.write_stbl(q, cut, data_at, from)?;
                            write_box(&mut minf, b"stbl", &stbl);
                        } else {
                            write_box(&mut minf, &kind, q);
                        }
                    }
                    write_box(&mut out, b"minf", &minf);
                }
                _ => write_box(&mut out, &kind, p),
            }
        }
        Ok(out)
    }

    fn write_stbl(
        &self,
        stbl: &[u8],
        cut: &TrackCut,
        data_at: u64,
        from: u64,
    ) -> Result<Vec<u8>, Bad> {
        let mut out = Vec::with_capacity(stbl.len());
        for b in Boxes::new(stbl) {
            let (kind, p) = b?;
            let vf = p.get(..4).ok_or(Bad("a table cut short"))?;
            let mut t = vf.to_vec();
            match &kind {
                b"stts" => write_pairs(&mut t, &self.stts, cut.first, cut.last),
                b"ctts" => write_pairs(
                    &mut t,
                    self.ctts.as_deref().unwrap_or(&[]),
                    cut.first,
                    cut.last,
                ),
                b"stss" => {
                    let kept: Vec<u32> = self
                        .stss
                        .as_deref()
                        .unwrap_or(&[])
                        .iter()
                        .filter(|&&s| s > cut.first && s <= cut.last)
                        .map(|&s| s - cut.first)
                        .collect();
                    put(&mut t, kept.len() as u32);
                    kept.iter().for_each(|&s| put(&mut t, s));
                }
                b"stsz" => {
                    put(&mut t, self.size);
                    put(&mut t, cut.last - cut.first);
                    if self.size == 0 {
                        let kept = self
                            .sizes
                            .get(cut.first as usize..cut.last as usize)
                            .unwrap_or(&[]);
                        kept.iter().for_each(|&s| put(&mut t, s));
                    }
                }
                b"stsc" => self.write_stsc(&mut t, cut),
                b"stco" | b"co64" => {
                    let kept = match cut.is_empty() {
                        true => &[],
                        false => self.chunks.get(cut.chunk..=cut.end_chunk).unwrap_or(&[]),
                    };
                    put(&mut t, kept.len() as u32);
                    for (i, &o) in kept.iter().enumerate() {
                        let o = if i == 0 { cut.data_start } else { o };
                        let moved =
                            o.checked_sub(from).ok_or(Bad("a chunk before the cut"))? + data_at;
                        if self.co64 {
                            t.extend_from_slice(&moved.to_be_bytes());
                        } else {
                            let m = u32::try_from(moved)
                                .map_err(|_| Bad("a chunk offset past 4 GB"))?;
                            put(&mut t, m);
                        }
                    }
                }
                _ => t = p.to_vec(),
            }
            write_box(&mut out, &kind, &t);
        }
        Ok(out)
    }

    /// The runs of samples per chunk of the kept chunks, renumbered from 1: the first keeps
    /// its samples from the cut on, the last those up to the end.
    fn write_stsc(&self, t: &mut Vec<u8>, cut: &TrackCut) {
        if cut.is_empty() {
            put(t, 0);
            return;
        }
        let mut runs: Vec<(u32, u32, u32)> = Vec::new();
        for chunk in cut.chunk..=cut.end_chunk {
            let (spc, sdi) = self.chunk_run(chunk);
            let upto = if chunk == cut.end_chunk {
                cut.end_keep
            } else {
                spc
            };
            let from = if chunk == cut.chunk { cut.within } else { 0 };
            let n = upto.saturating_sub(from);
            if runs.last().is_none_or(|&(_, rn, rd)| (rn, rd) != (n, sdi)) {
                runs.push(((chunk - cut.chunk) as u32 + 1, n, sdi));
            }
        }
        put(t, runs.len() as u32);
        for (f, spc, sdi) in runs {
            put(t, f);
            put(t, spc);
            put(t, sdi);
        }
    }
}

fn put(t: &mut Vec<u8>, v: u32) {
    t.extend_from_slice(&v.to_be_bytes());
}

/// A (count, value) table of samples `skip..last` only.
fn write_pairs(t: &mut Vec<u8>, pairs: &[(u32, u32)], skip: u32, last: u32) {
    let mut left = skip;
    let mut keep = last.saturating_sub(skip);
    let mut kept = Vec::with_capacity(pairs.len());
    for &(n, v) in pairs {
        if keep == 0 {
            break;
        }
        if left >= n {
            left -= n;
            continue;
        }
        let k = (n - left).min(keep);
        kept.push((k, v));
        keep -= k;
        left = 0;
    }
    put(t, kept.len() as u32);
    for (n, v) in kept {
        put(t, n);
        put(t, v);
    }
}
