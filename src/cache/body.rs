//! Stored bodies in one allocation of exactly their size, charged what they take.
//!
//! Why: a body as it arrives is a list of slices of hyper's read buffers, whose allocations
//! are larger than the slices and would be pinned by them for the object's life; and glibc
//! serves large blocks from its heap arenas, where what an eviction frees stays resident.
//! With a 64 MiB `memory_size` that was 1.28× (100 KB objects) and 1.56× (1 MB) of the
//! setting in RSS above the base (bench/RESULTS.md, "memory bound for large objects"). So a
//! body is copied once, when it is stored ([`store`]), into one allocation:
//!
//! - below [`MAPPED_MIN`]: a heap block of exactly its length;
//! - from [`MAPPED_MIN`] on: an anonymous mapping of its own, rounded up to whole pages and
//!   unmapped when the last reference goes, so an eviction gives the pages straight back to
//!   the kernel whatever the allocator does.
//!
//! The allocation is cut into [`STORE_CHUNK`] views (a hit sends few, large frames).
//! [`footprint`] is what a body stored this way takes; `Object::weight` charges it. (The
//! transient buffers of fills are `server::trim`'s business.)

use std::ptr::NonNull;
use std::sync::LazyLock;

use bytes::Bytes;

/// Body chunks in memory. Most stored bodies are one chunk: it is kept inline, not in a
/// second allocation (bench/RESULTS.md, "memory per object").
pub type MemoryChunks = smallvec::SmallVec<[Bytes; 1]>;

/// Stored bodies are sent in pieces of at most this size (views of one allocation).
pub const STORE_CHUNK: usize = 64 * 1024;

/// Bodies of at least this size get a mapping of their own (at most a page of slack: ≤ 6%).
pub const MAPPED_MIN: usize = 64 * 1024;

/// Bytes of bookkeeping per body besides its bytes: the shared reference count `Bytes`
/// allocates for a heap block once it is cloned (a hit clones it), or the owner box of a
/// mapping.
const SHARED: u64 = 64;

/// Heap blocks carry a header and are rounded up to 16 bytes (glibc).
const HEAP_HEADER: u64 = 16;

/// The size of a page, from the kernel (4 KiB where it cannot be asked).
static PAGE: LazyLock<usize> = LazyLock::new(|| {
    // SAFETY: sysconf only reads a system value; no memory of ours is involved.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
});

/// What a body of `len` bytes in one allocation, held as `pieces` views ([`store`]), takes in
/// memory: its allocation (heap block, or whole pages), the reference count or owner, and the
/// pieces' handles beyond the one an object keeps inline.
pub fn footprint(len: u64, pieces: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let bytes = if len >= MAPPED_MIN as u64 {
        len.next_multiple_of(*PAGE as u64)
    } else {
        (len + HEAP_HEADER).next_multiple_of(16)
    };
    let handles = if pieces > 1 {
        (pieces * std::mem::size_of::<Bytes>()) as u64
    } else {
        0
    };
    bytes + SHARED + handles
}

/// The body made of `chunks` (`total` bytes in all), copied into one allocation of exactly its
/// size and cut into [`STORE_CHUNK`] views.
pub fn store(chunks: &[Bytes], total: usize) -> MemoryChunks {
    let whole = one(chunks, total);
    if whole.is_empty() {
        return MemoryChunks::new();
    }
    if whole.len() <= STORE_CHUNK {
        return smallvec::smallvec![whole];
    }
    (0..whole.len())
        .step_by(STORE_CHUNK)
        .map(|at| whole.slice(at..(at + STORE_CHUNK).min(whole.len())))
        .collect()
}

/// Like [`store`], as one `Bytes` (not cut): a piece of partial content.
pub fn one(chunks: &[Bytes], total: usize) -> Bytes {
    let parts: Vec<&[u8]> = chunks.iter().map(|c| &c[..]).collect();
    let total = total.min(parts.iter().map(|p| p.len()).sum());
    if total == 0 {
        return Bytes::new();
    }
    let whole = if total >= MAPPED_MIN {
        Mapping::copy_of(&parts, total).map(Bytes::from_owner)
    } else {
        None
    };
    // Below MAPPED_MIN, or if the kernel refused a mapping: one heap block of exactly `total`
    // bytes (`Bytes::from` a full `Vec` keeps its allocation as it is).
    whole.unwrap_or_else(|| {
        let mut v = Vec::with_capacity(total);
        for p in &parts {
            v.extend_from_slice(&p[..p.len().min(total - v.len())]);
        }
        Bytes::from(v)
    })
}

/// An anonymous private mapping holding a body: `len` bytes written once at creation, then
/// only read; unmapped on drop. Because of that its pages may be lent to the kernel (sent
/// without a copy, `pages.rs`): it is registered there once written, forgotten before it is
/// unmapped.
struct Mapping {
    at: NonNull<u8>,
    len: usize,
    /// `len` rounded up to whole pages: what was mapped.
    mapped: usize,
}

// SAFETY: the mapping is owned by this value alone and never written after `copy_of`; shared
// references only read it, and dropping it from any thread unmaps it once.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: `&Mapping` only gives out `&[u8]` of immutable bytes.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// A new mapping holding the first `total` bytes of `parts` (which hold at least that
    /// many), one after the other. `None` if the kernel refuses it.
    fn copy_of(parts: &[&[u8]], total: usize) -> Option<Mapping> {
        let mapped = total.max(1).next_multiple_of(*PAGE);
        // SAFETY: an anonymous private mapping at an address the kernel picks; no existing
        // memory is affected. MAP_POPULATE: its pages are made present in one go (it is
        // written whole at once below) instead of one fault each.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return None;
        }
        let m = Mapping {
            at: NonNull::new(at.cast())?,
            len: total,
            mapped,
        };
        let mut filled = 0;
        for p in parts {
            let n = p.len().min(total - filled);
            // SAFETY: `filled + n ≤ total ≤ mapped`: inside the new mapping, which nothing
            // else refers to yet; the source is another allocation.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), m.at.as_ptr().add(filled), n);
            }
            filled += n;
        }
        // Complete and never written again: its pages may be lent to pipes (`pages.rs`).
        super::pages::register(m.at.as_ptr() as usize, m.len);
        Some(m)
    }
}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `len` bytes from `at` are mapped (readable, initialised: written or zero)
        // until `self` is dropped, and no longer written.
        unsafe { std::slice::from_raw_parts(self.at.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        super::pages::forget(self.at.as_ptr() as usize, self.len);
        // SAFETY: `at` and `mapped` are what mmap returned and was given; no reference into the
        // mapping outlives `self` (`Bytes::from_owner` drops the owner after the last view).
        unsafe { libc::munmap(self.at.as_ptr().cast(), self.mapped) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(total: usize, piece: usize) -> Vec<Bytes> {
        let data: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        data.chunks(piece).map(Bytes::copy_from_slice).collect()
    }

    fn joined(chunks: &[Bytes]) -> Vec<u8> {
        chunks.iter().flat_map(|c| c.to_vec()).collect()
    }

    /// Regression (issue 23, item 8): a body kept as slices of hyper's read buffer pinned the
    /// whole buffer (RSS 1.3-1.6x `memory_size` with 100 KB-1 MB objects). Every stored body
    /// is a copy, in one allocation of its own, cut into views.
    #[test]
    fn stored_bodies_are_copies_in_one_allocation() {
        for total in [1, 100, 6451, MAPPED_MIN - 1, MAPPED_MIN, 100_000, 1_000_000] {
            // As from hyper: slices of a larger read buffer.
            let buffer = Bytes::from(vec![7u8; total + 8192]);
            let from_hyper: Vec<Bytes> = (0..total)
                .step_by(4096)
                .map(|at| buffer.slice(at..(at + 4096).min(total)))
                .collect();
            let stored = store(&from_hyper, total);
            assert_eq!(joined(&stored), vec![7u8; total], "{total}");
            assert_eq!(stored.len(), total.div_ceil(STORE_CHUNK), "{total}");
            for c in &stored {
                let (at, b) = (c.as_ptr() as usize, buffer.as_ptr() as usize);
                assert!(
                    at + c.len() <= b || at >= b + buffer.len(),
                    "{total}: a copy"
                );
                assert!(c.len() <= STORE_CHUNK);
            }
            // Views of one allocation, in order, back to back.
            for w in stored.windows(2) {
                assert_eq!(w[0].as_ptr() as usize + w[0].len(), w[1].as_ptr() as usize);
            }
        }
    }

    #[test]
    fn contents_survive_any_framing() {
        for (total, piece) in [
            (0, 1),
            (10, 3),
            (70_000, 1000),
            (300_000, 65_536),
            (200_001, 7),
        ] {
            let chunks = pieces(total, piece);
            let stored = store(&chunks, total);
            assert_eq!(joined(&stored), joined(&chunks), "{total}/{piece}");
            // Clones (what hits do) outlive the stored list.
            let clones: Vec<Bytes> = stored.iter().cloned().collect();
            drop(stored);
            assert_eq!(joined(&clones), joined(&chunks));
        }
        // A `total` beyond what the chunks hold is what they hold.
        assert_eq!(joined(&store(&pieces(10, 3), 20)), joined(&pieces(10, 3)));
    }

    #[test]
    fn the_footprint_is_what_is_allocated() {
        assert_eq!(footprint(0, 0), 0);
        // A heap block: length + header, in 16-byte steps.
        assert_eq!(footprint(100, 1), 128 + SHARED);
        assert_eq!(footprint(MAPPED_MIN as u64 - 1, 1), 65_536 + 16 + SHARED);
        // A mapping: whole pages, one piece.
        let page = *PAGE as u64;
        assert_eq!(footprint(MAPPED_MIN as u64, 1), 65_536 + SHARED);
        // 1 MB: whole pages, and the handles of its 16 pieces.
        let mb = store(&[Bytes::from(vec![1u8; 1_000_000])], 1_000_000);
        assert_eq!(
            footprint(1_000_000, mb.len()),
            1_000_000u64.next_multiple_of(page) + SHARED + 16 * 32
        );
        assert!(footprint(1_000_000, 16) < 1_000_000 + 4096 + SHARED + 16 * 32);
    }

    /// A stored body's pages lent to a pipe keep its bytes after the body is dropped (and
    /// unmapped): the kernel holds the pages, and nothing ever writes them.
    #[test]
    fn lent_pages_outlive_the_body() {
        use super::super::pages::{Pipe, is_stored, tests::read_all};
        let data: Vec<u8> = (0..200_000).map(|i| (i % 251) as u8).collect();
        let stored = store(&[Bytes::from(data.clone())], data.len());
        assert!(stored.iter().all(|c| is_stored(c)));
        let mut pipe = Pipe::take().expect("a pipe");
        let slices: Vec<std::io::IoSlice<'_>> =
            stored.iter().map(|c| std::io::IoSlice::new(c)).collect();
        let (put, lent) = pipe.fill(&[], &slices).expect("fill");
        assert_eq!(put, lent);
        assert!(put >= 65_536, "{put}");
        drop(slices);
        drop(stored);
        assert_eq!(read_all(&pipe, put), data[..put]);
        pipe.drained(put);
    }
}
