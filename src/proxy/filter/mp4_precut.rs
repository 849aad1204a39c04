//! An MP4 seek on a stored copy cut before its response head goes out (`Txn::mp4_cut`): its
//! first bytes and `moov` are read out of order off the async threads (`mp4_source.rs`: from
//! memory, or from disk) and the cut made up front, so the answer's length is known — it has a
//! `Content-Length`, and a `Range` is cut from the answer (`deliver.rs`), as nginx's range
//! filter takes the `mp4` module's output and as a seek on a sliced file is answered
//! (`proxy/slice/seek.rs`). The filter (`mp4.rs`, `Mp4::with_cut`) then only sends the new head
//! and the kept media data. The cut is the one the filter makes as the body streams: the same
//! bytes, the same files sent whole.

use bytes::Bytes;

use super::mp4_source::ReadAt;
use crate::mp4::held::Hold;
use crate::mp4::{self, Bad, Scan};

/// A cut made up front: `head` (the `ftyp`, the new `moov`, an `mdat` header), then the
/// stored body's bytes `from .. to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Precut {
    pub head: Bytes,
    pub from: u64,
    pub to: u64,
}

impl Precut {
    /// The answer's length.
    pub fn len(&self) -> u64 {
        self.head.len() as u64 + (self.to - self.from)
    }

    /// Never: the head has boxes.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Why a precut refused to hold more (`mp4_seek_memory`).
pub const MEMORY: &str = "server.mp4_moov_memory is reached: the moov is not read";

/// The seek `start .. end` (seconds) of `source`'s file, reading its first bytes (at most
/// `max`, held under `hold`) and a `moov` after the `mdat` (when it ends within `max`).
/// `Ok(None)`: nothing to cut (the file as it is); `Err`: a file that cannot be cut.
/// Blocking: a body on disk is read from disk.
pub fn precut(
    source: &dyn ReadAt,
    (start, end): (f64, Option<f64>),
    max: usize,
    hold: &mut Hold,
) -> Result<Option<Precut>, Bad> {
    let len = source.body_len();
    let mut prefix: Vec<u8> = Vec::new();
    let mut need = 16u64.min(len);
    let scan = loop {
        if (prefix.len() as u64) < need {
            if !hold.grow_to(need) {
                return Err(Bad(MEMORY));
            }
            let have = prefix.len() as u64;
            let more = source.read_at(have, (need - have) as usize)?;
            if more.is_empty() {
                return Err(Bad("the file ends before its moov"));
            }
            prefix.extend_from_slice(&more);
        }
        match mp4::scan(&prefix, max) {
            Scan::More(n) if n as u64 <= len && n > prefix.len() => need = n as u64,
            Scan::More(_) => return Err(Bad("the file ends before its moov")),
            other => break other,
        }
    };
    // As the filter sends: fast start without an end, the rest of the file after the data.
    let (cut, bounded) = match scan {
        Scan::Ready(layout) => (mp4::cut_span(&prefix, &layout, start, end), end.is_some()),
        Scan::MoovAfterMdat(late) => {
            let moov =
                late.find_moov_within(len, max, max as u64, &mut |at, n| source.read_at(at, n))?;
            (late.cut(&prefix, &moov, start, end), true)
        }
        Scan::Bad(b) => return Err(b),
        Scan::More(_) => return Err(Bad("the file ends before its moov")),
    };
    let Some(cut) = cut? else {
        return Ok(None);
    };
    let to = match (bounded, cut.to) {
        (true, Some(to)) => to.min(len),
        _ => len,
    };
    Ok(Some(Precut {
        head: Bytes::from(cut.head),
        from: cut.from.min(len),
        to: to.max(cut.from.min(len)),
    }))
}
