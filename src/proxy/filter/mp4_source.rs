//! What an MP4 seek reads out of order (`mp4.rs`: a file whose `moov` comes after its `mdat`,
//! as nginx's `mp4` module reads it from the file): a stored object's body, in memory or on
//! disk, read at an offset.

use crate::cache::disk::format::BODY_CHUNK;
use crate::cache::{Body, Object};
use crate::mp4::Bad;

/// A body that can be read at any offset. Blocking: a body on disk is read from disk.
pub trait ReadAt: Send + Sync {
    /// Its length.
    fn body_len(&self) -> u64;
    /// Its bytes from `at`, `n` of them (fewer only at its end).
    fn read_at(&self, at: u64, n: usize) -> Result<Vec<u8>, Bad>;
}

impl ReadAt for Object {
    fn body_len(&self) -> u64 {
        self.body_len
    }

    fn read_at(&self, at: u64, n: usize) -> Result<Vec<u8>, Bad> {
        let end = at.saturating_add(n as u64).min(self.body_len);
        let mut out = Vec::with_capacity(end.saturating_sub(at) as usize);
        match &self.body {
            Body::Memory(chunks) => {
                let mut pos = 0u64;
                for c in chunks {
                    copy_overlap(&mut out, c, pos, (at, end));
                    pos += c.len() as u64;
                }
            }
            Body::Disk(disk) => {
                let mut i = at / BODY_CHUNK;
                while i * BODY_CHUNK < end {
                    let chunk = usize::try_from(i)
                        .ok()
                        .and_then(|i| disk.read_chunk(i).ok())
                        .ok_or(Bad("the stored body could not be read"))?;
                    copy_overlap(&mut out, &chunk, i * BODY_CHUNK, (at, end));
                    i += 1;
                }
            }
        }
        Ok(out)
    }
}

/// Appends the part of `chunk` (at `pos` in the body) that falls in `from..to`.
fn copy_overlap(out: &mut Vec<u8>, chunk: &[u8], pos: u64, (from, to): (u64, u64)) {
    let (lo, hi) = (from.max(pos), to.min(pos + chunk.len() as u64));
    if lo < hi {
        out.extend_from_slice(&chunk[(lo - pos) as usize..(hi - pos) as usize]);
    }
}
