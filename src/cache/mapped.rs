//! Large bodies in memory-backed files, so a hit can be sent with `sendfile(2)`.
//!
//! A body of at least [`MIN_MAPPED`] bytes is copied once, when its fill completes, into an
//! anonymous memory file of its own (`memfd_create`) and read back through a read-only shared
//! mapping of that file: every code path still sees ordinary [`Bytes`] chunks (slices of the
//! mapping), and the connection's fast path can ask [`locate`] where a chunk lives in its file
//! and let the kernel send it from those pages without copying them into the socket (on a
//! 21 MB hit the user → kernel copy was a third of the CPU).
//!
//! Why one file per body: the kernel keeps references to the pages `sendfile` queued until
//! the packets carrying them are acknowledged, after the call returned. A file's pages are never
//! written again once its body is in (the mapping is read-only and the file is written only
//! before it is mapped), and when the body is dropped the file goes with it: pages still in
//! flight are freed only when the kernel lets go of them. Nothing can rewrite bytes on their way
//! out, which a shared arena reusing its ranges could.
//!
//! The memory is the same as a heap body's (shared memory, counted in RSS while mapped), minus
//! the chunks' slack; the memory tier charges it as before.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::RwLock;

use bytes::Bytes;

/// Bodies this large or larger are mapped (smaller ones gain little: a few system calls).
pub const MIN_MAPPED: u64 = 1 << 20;

/// Pieces a mapped body is handed out in (what the hyper path sends per frame; the fast path
/// sends whole runs of them with one `sendfile`).
const PIECE: usize = 256 * 1024;

/// Mapped bodies alive at most: each holds a descriptor and a mapping, and neither may starve
/// client connections (`RLIMIT_NOFILE`) or the process's mappings (`vm.max_map_count`, 65,530
/// by default). Beyond it bodies stay on the heap. A quarter of the descriptor limit, at most
/// 16,384.
fn max_mapped() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one `rlimit` into the local it is given.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
        let fds = if ok { limit.rlim_cur as usize } else { 1024 };
        (fds / 4).min(16_384)
    })
}

/// Mapped bodies alive now.
static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Mapped regions by start address: `(end, file)`. Looked up per chunk by the fast path only
/// for chunks of at least [`PIECE`] bytes.
static REGIONS: RwLock<BTreeMap<usize, (usize, RawFd)>> = RwLock::new(BTreeMap::new());

/// A body's file and its read-only mapping; unmapped and closed when the last chunk goes.
struct Mapping {
    ptr: *const u8,
    len: usize,
    /// Open for `sendfile` while any chunk of the body lives; closed after the unmap.
    _file: OwnedFd,
}

// SAFETY: the mapping is read-only and never changed while it exists; the pointer is only
// read through `as_ref`, from any thread, like a `&'static [u8]` that lives as long as `self`.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared reads of immutable memory.
unsafe impl Sync for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` is a live PROT_READ mapping of `file` made in `map`, unmapped
        // only in `drop`; nothing writes the file after it was mapped.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Ok(mut regions) = REGIONS.write() {
            regions.remove(&(self.ptr as usize));
            if regions.is_empty() {
                REGIONS_EMPTY.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        // SAFETY: unmaps exactly the region `map` created; no slice of it outlives `self`
        // (every `Bytes` over it holds this owner).
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
        // `file` closes with `self`; pages the kernel still sends from stay until it is done.
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Copies `chunks` (`total` bytes) into a memory file of their own and returns the body as
/// slices of its mapping. `None` when the kernel refuses (no memfd, no memory): the caller keeps
/// the chunks as they are.
pub fn map(chunks: &[Bytes], total: u64) -> Option<Vec<Bytes>> {
    let len = usize::try_from(total).ok().filter(|l| *l > 0)?;
    // Counted from here; every way out below that maps nothing gives the place back.
    if LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= max_mapped() {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        return None;
    }
    let mapped = map_file(chunks, total, len);
    if mapped.is_none() {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
    mapped
}

fn map_file(chunks: &[Bytes], total: u64, len: usize) -> Option<Vec<Bytes>> {
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new descriptor
    // or -1, and touches no memory of ours.
    let fd = unsafe { libc::memfd_create(c"shellac-body".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nothing else.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut writer = std::fs::File::from(file);
    writer.set_len(total).ok()?;
    for c in chunks {
        writer.write_all(c).ok()?;
    }
    let file = OwnedFd::from(writer);
    // SAFETY: maps `len` bytes of a file that is exactly `len` bytes long, read-only and
    // shared; the result is checked against MAP_FAILED before use.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    let ptr = ptr as *const u8;
    if let Ok(mut regions) = REGIONS.write() {
        regions.insert(ptr as usize, (ptr as usize + len, file.as_raw_fd()));
        REGIONS_EMPTY.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let whole = Bytes::from_owner(Mapping {
        ptr,
        len,
        _file: file,
    });
    Some(
        (0..len)
            .step_by(PIECE)
            .map(|at| whole.slice(at..(at + PIECE).min(len)))
            .collect(),
    )
}

/// Where a run of mapped chunks lives: the body's file, the offset of the first chunk's first
/// byte in it, and how many bytes of `chunks` continue from there in that file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub file: RawFd,
    pub offset: u64,
    pub len: usize,
}

/// The run of mapped body bytes `chunks` starts with, if its first chunk is a slice of a
/// mapped body. Valid as long as the caller holds the first chunk (it keeps the mapping, and
/// so the file, open).
pub fn locate(chunks: &[Bytes]) -> Option<Run> {
    let first = chunks.first()?;
    if first.is_empty() || REGIONS_EMPTY.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let at = first.as_ptr() as usize;
    let (start, end, file) = {
        let regions = REGIONS.read().ok()?;
        let (&start, &(end, file)) = regions.range(..=at).next_back()?;
        (start, end, file)
    };
    if at + first.len() > end {
        return None;
    }
    // Later chunks join the run while they continue it inside the same mapping.
    let mut next = at;
    for c in chunks {
        if c.as_ptr() as usize != next || next + c.len() > end {
            break;
        }
        next += c.len();
    }
    Some(Run {
        file,
        offset: (at - start) as u64,
        len: next - at,
    })
}

/// No mapped body exists: the fast path skips the lookup (and its lock) entirely.
static REGIONS_EMPTY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

#[cfg(test)]
mod tests {
    use super::*;

    fn body(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn a_mapped_body_reads_back_whole_in_pieces() {
        let data = body(3 * PIECE + 12345);
        let chunks: Vec<Bytes> = data.chunks(70_000).map(Bytes::copy_from_slice).collect();
        let mapped = map(&chunks, data.len() as u64).expect("memfd and mmap work here");
        assert_eq!(mapped.len(), 4);
        assert_eq!(mapped.concat(), data);
        let run = locate(&mapped[1..]).expect("a mapped piece is found");
        assert_eq!((run.offset, run.len), (PIECE as u64, data.len() - PIECE));
        let whole = locate(&mapped).unwrap();
        assert_eq!(
            (whole.file, whole.offset, whole.len),
            (run.file, 0, data.len())
        );
        // A run stops where the chunks stop continuing each other.
        let gap = [mapped[0].clone(), mapped[2].clone()];
        assert_eq!(locate(&gap).unwrap().len, PIECE);
        let partial = [mapped[1].slice(10..), mapped[2].clone()];
        assert_eq!(locate(&partial).unwrap().offset, PIECE as u64 + 10);
        assert!(
            locate(&[Bytes::from(vec![0u8; PIECE])]).is_none(),
            "heap bytes"
        );
    }

    #[test]
    fn the_mapping_goes_with_the_last_chunk() {
        let data = body(2 * PIECE);
        let mapped = map(&[Bytes::from(data.clone())], 2 * PIECE as u64).unwrap();
        let start = mapped[0].as_ptr() as usize;
        let fd = locate(&mapped).unwrap().file;
        let one = mapped[1].clone();
        drop(mapped);
        assert_eq!(&one[..], &data[PIECE..], "a chunk keeps its body mapped");
        assert!(locate(std::slice::from_ref(&one)).is_some());
        drop(one);
        // Another test's body may be mapped at the same address since; not with our file.
        let left = REGIONS.read().unwrap().get(&start).copied();
        assert!(left.is_none_or(|(_, f)| f != fd), "unregistered");
    }
}
