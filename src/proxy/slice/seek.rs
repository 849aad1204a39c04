//! FLV and MP4 seeks (`?start=`, a rule's `flv` / `mp4`) on a sliced representation: cut as
//! the delivery filters cut a stored object (`filter/flv.rs`, `filter/mp4.rs`), reading only
//! the slices the cut needs. An FLV seek reads the slices from its offset on. An MP4 seek
//! reads the slices that hold the `moov` — the first ones for a fast-start file, or, for a
//! file whose `moov` comes after its `mdat`, the first (`ftyp`, the `mdat` header) and those
//! the box headers after the `mdat` lead to (as nginx reads the file) — before the response
//! head goes out, then only the slices of the kept media data. The answer's length is known
//! up front: `Content-Length` is sent, and a `Range` is cut from the answer (`serve.rs`).
//! What the cut read is told (`Read`): which slices, whether any was not stored — a HEAD
//! answers from it without reading a slice of media data. The first bytes and `moov` it holds
//! count against the process's bound (`server.mp4_moov_memory`, `mp4/held.rs`).

use std::time::Instant;

use bytes::Bytes;
use http::StatusCode;
use http::header::HeaderMap;
use http_body_util::BodyExt;

use super::acquire::acquire;
use super::{Ctx, SliceFailure};
use crate::mp4::held::Hold;
use crate::mp4::late::After;
use crate::mp4::{self, Bad, Late, Scan};
use crate::proxy::filter::flv;

/// A seek asked of a sliced response (from `Txn::flv_start` / `Txn::mp4_start`).
#[derive(Clone, Copy, Debug)]
pub(super) enum Wanted {
    Flv(u64),
    /// The span in seconds, and `mp4_max_moov_size`.
    Mp4((f64, Option<f64>), usize),
}

/// What a seek answers with.
pub(super) enum Seek {
    /// `head` (the FLV header, or the MP4's `ftyp`, new `moov` and `mdat` header), then the
    /// representation's bytes `from .. to` (`to` excluded, `from < to`).
    Cut { head: Bytes, from: u64, to: u64 },
    /// The representation as it is: nothing to cut (an offset past the end, a time before
    /// the second keyframe), or, with a reason, a file that cannot be cut (logged, counted).
    Whole(Option<&'static str>),
}

/// What a cut read before the response head goes out.
#[derive(Default)]
pub(super) struct Read {
    /// The slices read (their indexes), each once.
    pub slices: Vec<u64>,
    /// Whether any of them was not stored (fetched, or followed while another request
    /// fetched it).
    pub missed: bool,
    /// The fields and age (seconds) of the first slice read.
    pub fields: Option<(HeaderMap, u64)>,
}

/// Why a seek on a sliced file is sent whole when the process's bound on held bytes is
/// reached.
const MEMORY: &str = "server.mp4_moov_memory is reached: the moov is not read";

/// The seek `wanted` over `ctx`'s representation, and what it read. `Err`: a slice could not
/// be had.
pub(super) async fn cut(ctx: &Ctx, wanted: Wanted) -> Result<(Seek, Read), SliceFailure> {
    let len = ctx.meta.length;
    let mut reader = Reader {
        ctx,
        read: Read::default(),
        hold: Hold::new(
            ctx.proxy.shared.moov_held.clone(),
            ctx.proxy.config.server.mp4_moov_memory.0,
        ),
    };
    let seek = match wanted {
        Wanted::Flv(start) if start < len => Seek::Cut {
            head: Bytes::from_static(flv::HEADER),
            from: start,
            to: len,
        },
        Wanted::Flv(_) => Seek::Whole(None),
        Wanted::Mp4(span, max) => mp4_cut(&mut reader, span, max).await?,
    };
    if let Seek::Whole(Some(why)) = seek {
        ctx.proxy.counters.mp4_seek_whole.inc();
        tracing::warn!(key = %ctx.primary, reason = why, "mp4 seek: the file is sent whole");
    }
    Ok((seek, reader.read))
}

/// Bytes of a sliced representation read at any offset, each slice had as a response's is
/// (the tiers, another request's fetch, or fetched and stored).
struct Reader<'a> {
    ctx: &'a Ctx,
    read: Read,
    /// The bytes held, under the process's bound.
    hold: Hold,
}

impl Reader<'_> {
    /// Whether `total` bytes may be held (`mp4_seek_memory` counts a refusal).
    fn may_hold(&mut self, total: u64) -> bool {
        let ok = self.hold.grow_to(total);
        if !ok {
            self.ctx.proxy.counters.mp4_seek_memory.inc();
        }
        ok
    }

    /// The bytes `at .. at + n` (fewer only at the end).
    async fn read(&mut self, at: u64, n: u64) -> Result<Vec<u8>, SliceFailure> {
        let (size, len) = (self.ctx.meta.slice_size, self.ctx.meta.length);
        let end = at.saturating_add(n).min(len);
        let mut out = Vec::with_capacity(end.saturating_sub(at) as usize);
        let mut index = at / size;
        while index * size < end {
            let first = index * size;
            let (lo, hi) = (at.max(first) - first, end.min(first + size) - first);
            let source = acquire(self.ctx, index).await?;
            if !self.read.slices.contains(&index) {
                self.read.slices.push(index);
                self.ctx.proxy.counters.slice_seek_slices.inc();
            }
            self.read.missed |= !source.is_hit();
            if self.read.fields.is_none() {
                self.read.fields = Some(source.fields(Instant::now()));
            }
            let mut body = source.body(lo, hi - lo);
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|_| {
                    SliceFailure::Failed(StatusCode::BAD_GATEWAY, "slice-read-failed")
                })?;
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            index += 1;
        }
        if out.len() as u64 != end.saturating_sub(at) {
            return Err(SliceFailure::Failed(
                StatusCode::BAD_GATEWAY,
                "slice-read-short",
            ));
        }
        Ok(out)
    }
}

/// An MP4 cut at `start` .. `end` seconds from the slices that hold its `moov`.
async fn mp4_cut(
    reader: &mut Reader<'_>,
    (start, end): (f64, Option<f64>),
    max: usize,
) -> Result<Seek, SliceFailure> {
    let (size, len) = (reader.ctx.meta.slice_size, reader.ctx.meta.length);
    // The first bytes, a slice at a time, until the moov (or the mdat) is in.
    let mut prefix = Vec::new();
    let mut need = 16u64;
    let scan = loop {
        if (prefix.len() as u64) < need {
            let upto = need.div_ceil(size).saturating_mul(size).min(len);
            let have = prefix.len() as u64;
            if !reader.may_hold(upto) {
                return Ok(Seek::Whole(Some(MEMORY)));
            }
            prefix.extend(reader.read(have, upto - have).await?);
        }
        match mp4::scan(&prefix, max) {
            Scan::More(n) if n as u64 <= len && n > prefix.len() => need = n as u64,
            Scan::More(_) => return Ok(Seek::Whole(Some("the file ends before its moov"))),
            other => break other,
        }
    };
    // Fast start without an end: the rest of the file follows the data, as the filter sends.
    let (cut, bounded) = match scan {
        Scan::Ready(layout) => (mp4::cut_span(&prefix, &layout, start, end), end.is_some()),
        Scan::MoovAfterMdat(late) => match find_moov(reader, &late, max, prefix.len()).await? {
            Ok(moov) => (late.cut(&prefix, &moov, start, end), true),
            Err(b) => return Ok(Seek::Whole(Some(b.0))),
        },
        Scan::Bad(b) => return Ok(Seek::Whole(Some(b.0))),
        Scan::More(_) => return Ok(Seek::Whole(Some("the file ends before its moov"))),
    };
    Ok(match cut {
        Ok(Some(c)) => {
            let to = match (bounded, c.to) {
                (true, Some(to)) => to.min(len),
                _ => len,
            };
            if c.from >= to {
                Seek::Whole(Some("no media data after the cut"))
            } else {
                Seek::Cut {
                    head: Bytes::from(c.head),
                    from: c.from,
                    to,
                }
            }
        }
        Ok(None) => Seek::Whole(None),
        Err(b) => Seek::Whole(Some(b.0)),
    })
}

/// The `moov` after the `mdat`, by the box headers after it (`Late::find_moov`'s walk over
/// slices): the inner `Err` is a file that cannot be cut.
async fn find_moov(
    reader: &mut Reader<'_>,
    late: &Late,
    max: usize,
    held: usize,
) -> Result<Result<Vec<u8>, Bad>, SliceFailure> {
    let len = reader.ctx.meta.length;
    let mut at = match late.after_mdat() {
        Ok(at) => at,
        Err(b) => return Ok(Err(b)),
    };
    for _ in 0..Late::MAX_BOXES {
        if at >= len {
            break;
        }
        let head = reader.read(at, 16).await?;
        match Late::next(at, &head, len, max) {
            Ok(After::Moov(_, size)) if !reader.may_hold(held as u64 + size) => {
                return Ok(Err(Bad(MEMORY)));
            }
            Ok(After::Moov(at, size)) => return Ok(Ok(reader.read(at, size).await?)),
            Ok(After::Next(next)) => at = next,
            Err(b) => return Ok(Err(b)),
        }
    }
    Ok(Err(Bad("no moov after the mdat")))
}
