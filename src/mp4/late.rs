//! Files whose `moov` comes after their `mdat` (written without "fast start", as cameras and
//! ffmpeg write them by default), cut as nginx's `mp4` module cuts them: the file is read out
//! of order. Its first bytes say where the `mdat` is ([`Scan::MoovAfterMdat`](super::Scan));
//! the `moov` is found by the chain of box headers after the `mdat` ([`Late::find_moov`],
//! over any random reads), read whole (at most a bound), and cut as a fast-start file's
//! ([`Late::cut`]): the answer is the `ftyp`, the new `moov`, an `mdat` header, then the media
//! data from the first kept sample to the end of the `mdat` (the old `moov` after it is not
//! sent).

use super::bad::Bad;
use super::boxes::Header;
use super::cut::{Cut, cut_parts};
use super::layout::Late;

/// Boxes after the `mdat` looked at before the `moov` is given up on (a camera writes a
/// `moov`, maybe a `free` or `udta` or two).
const MAX_BOXES: usize = 64;

/// Why a `moov` after the `mdat` that ends past the bytes a seek may hold is not cut.
pub const PAST_REACH: &str = "the moov after the mdat ends past mp4_max_moov_size";

/// What the box header at an offset after the `mdat` says ([`Late::next`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// The `moov` is there: its offset and size (at most the bound).
    Moov(u64, u64),
    /// Another box: the offset of the one after it.
    Next(u64),
}

impl Late {
    /// The offset of the first box after the `mdat`: where the `moov` is looked for.
    pub fn after_mdat(&self) -> Result<u64, Bad> {
        self.mdat_end.ok_or(Bad(
            "the mdat runs to the end of the file: no moov after it",
        ))
    }

    /// One step of the walk after the `mdat`: the box whose header (`head`, its first 16
    /// bytes or as many as the file has) is at `at` of a file of `len` bytes; a `moov` larger
    /// than `max` bytes is [`Bad`]. At most [`Late::MAX_BOXES`] steps are taken.
    pub fn next(at: u64, head: &[u8], len: u64, max: usize) -> Result<After, Bad> {
        let header = Header::read(head)?.ok_or(Bad("a box cut short after the mdat"))?;
        let size = header.size.unwrap_or(len - at.min(len));
        let end = at
            .checked_add(size)
            .filter(|&e| e <= len)
            .ok_or(Bad("a box after the mdat runs past the end of the file"))?;
        match &header.kind {
            b"moov" if size > max as u64 => Err(Bad("the moov is too large")),
            b"moov" => Ok(After::Moov(at, size)),
            b"moof" | b"mvex" => Err(Bad("a fragmented mp4")),
            _ => Ok(After::Next(end)),
        }
    }

    /// Boxes after the `mdat` looked at before the `moov` is given up on.
    pub const MAX_BOXES: usize = MAX_BOXES;

    /// The file's `moov` box, found after its `mdat` by the box headers that follow it, with
    /// `read(at, n)`: the file's bytes from `at`, `n` of them (fewer only at its end). `len`
    /// is the file's length; a `moov` larger than `max` bytes is [`Bad`].
    pub fn find_moov(
        &self,
        len: u64,
        max: usize,
        read: &mut dyn FnMut(u64, usize) -> Result<Vec<u8>, Bad>,
    ) -> Result<Vec<u8>, Bad> {
        self.find_moov_within(len, max, u64::MAX, read)
    }

    /// [`Late::find_moov`] for a `moov` that must end within the file's first `reach` bytes
    /// (a stored copy is cut as its body streaming would be: `proxy/filter/mp4.rs`); one that
    /// ends past them is [`Bad`], found by its header alone (it is not read).
    pub fn find_moov_within(
        &self,
        len: u64,
        max: usize,
        reach: u64,
        read: &mut dyn FnMut(u64, usize) -> Result<Vec<u8>, Bad>,
    ) -> Result<Vec<u8>, Bad> {
        let mut at = self.after_mdat()?;
        for _ in 0..MAX_BOXES {
            if at >= len {
                break;
            }
            let head = read(at, 16.min((len - at) as usize))?;
            match Late::next(at, &head, len, max)? {
                After::Moov(at, size) if at.saturating_add(size) > reach => {
                    return Err(Bad(PAST_REACH));
                }
                After::Moov(at, size) => {
                    let moov = read(at, size as usize)?;
                    if moov.len() as u64 != size {
                        return Err(Bad("short moov"));
                    }
                    return Ok(moov);
                }
                After::Next(end) => at = end,
            }
        }
        Err(Bad("no moov after the mdat"))
    }

    /// Cuts the file at `start` seconds, up to `end` (as [`cut_span`](super::cut_span)), given
    /// its first bytes (`prefix`, holding the `ftyp`) and its `moov` ([`Late::find_moov`]).
    /// The data (`from..to`) never runs past the `mdat`.
    pub fn cut(
        &self,
        prefix: &[u8],
        moov: &[u8],
        start: f64,
        end: Option<f64>,
    ) -> Result<Option<Cut>, Bad> {
        let mdat_end = self.mdat_end.ok_or(Bad("no moov after the mdat"))?;
        let ftyp = match &self.ftyp {
            Some(r) => prefix.get(r.clone()).ok_or(Bad("short ftyp"))?,
            None => &[],
        };
        cut_parts(ftyp, moov, (self.mdat_data, Some(mdat_end)), start, end)
    }
}

/// `read` over a file in memory (tests, the fuzz target).
pub fn read_in(file: &[u8]) -> impl FnMut(u64, usize) -> Result<Vec<u8>, Bad> + '_ {
    move |at, n| {
        let at = usize::try_from(at).map_err(|_| Bad("past the end"))?;
        let end = at.saturating_add(n).min(file.len());
        Ok(file.get(at..end).unwrap_or(&[]).to_vec())
    }
}
