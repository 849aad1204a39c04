//! Pages for the bytes a pipe carries ahead of a stored body (a response head and its `Date`
//! line), so they go into the pipe by reference too, in the same vmsplice(2) as the body:
//! one system call per response fewer than a write(2) of them into the pipe first
//! (`bench/ceiling.c`: `splice1` against `splice`).
//!
//! Heap memory cannot be lent (it is reused as soon as it is freed, while the kernel may
//! still hold its pages). An arena can: each thread copies those bytes into a mapping of its
//! own, always at fresh bytes past the last ones (never written twice), and when the mapping
//! is used up it is unmapped (never reused) and a new one is made — the pages the kernel
//! still holds stay alive with their bytes until it lets them go, as a stored body's do.

use std::cell::RefCell;
use std::io::IoSlice;
use std::ptr::NonNull;

/// Bytes of one arena mapping (a response head of ~400 bytes: ~650 per mapping).
const ARENA: usize = 256 * 1024;

/// Bytes copied into the arena at most at once; longer prefixes are written into the pipe.
pub(super) const MAX_COPY: usize = 4096;

/// A copy never crosses a boundary of this many bytes (the smallest page size): it starts a
/// fresh page instead, so that it is one pipe buffer, not two.
///
/// Why: splice(2) hands a pipe to a TCP socket 16 buffers per `sendmsg` (`splice_to_socket`).
/// A head in two buffers before a 68 KB body (17 pages) made the first 16 buffers fill the
/// first segment's 17 fragments short of its size, so the segment was not sent until the
/// next batch: both segments then left in one `tcp_write_xmit`, and the second waited for
/// the pacing timer (BBR's internal pacing: an hrtimer and a softirq) — on ~7.4% of such
/// hits, ~307 / 4096 of them (bench/RESULTS.md, "twelfth stop: send").
const NO_CROSSING: usize = 4096;

/// One thread's arena mapping and how much of it is used.
struct Arena {
    at: NonNull<u8>,
    used: usize,
}

impl Arena {
    fn new() -> Option<Arena> {
        // SAFETY: an anonymous private mapping at an address the kernel picks; no existing
        // memory is affected. MAP_POPULATE: present at once rather than one fault per page.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ARENA,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return None;
        }
        Some(Arena {
            at: NonNull::new(at.cast())?,
            used: 0,
        })
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: `at` is what mmap returned for `ARENA` bytes; the arena hands out raw
        // pointers only for the vmsplice(2) call they are copied for, never a reference that
        // outlives it.
        unsafe { libc::munmap(self.at.as_ptr().cast(), ARENA) };
    }
}

thread_local! {
    static ARENA_OF_THREAD: RefCell<Option<Arena>> = const { RefCell::new(None) };
}

/// Copies `bufs` (at most [`MAX_COPY`] bytes in all) to fresh bytes of this thread's arena
/// and calls `lend` with an `IoSlice` of the copy, to vmsplice(2) it. The copy is never
/// written again, and its mapping is unmapped, not reused, once used up: the pages the kernel
/// takes keep those bytes for as long as it holds them. `None` when the kernel refuses a
/// mapping (the caller writes the bytes into the pipe instead).
pub(super) fn with_copy<R>(bufs: &[IoSlice<'_>], lend: impl FnOnce(IoSlice<'_>) -> R) -> Option<R> {
    let len: usize = bufs.iter().map(|b| b.len()).sum();
    if len == 0 || len > MAX_COPY {
        return None;
    }
    ARENA_OF_THREAD.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot
            .as_ref()
            .is_none_or(|a| start_of(a.used, len) + len > ARENA)
        {
            // The old mapping (if any) is unmapped here: nothing of ours refers to it.
            *slot = None;
            *slot = Some(Arena::new()?);
        }
        let arena = slot.as_mut()?;
        // Bytes skipped to start a fresh page stay unwritten (never handed out).
        arena.used = start_of(arena.used, len);
        let start = arena.used;
        for b in bufs {
            // SAFETY: `start + len ≤ ARENA`: inside the mapping, at bytes never handed out
            // before (only `used` onwards are written, and `used` only grows); the source is
            // another allocation.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    b.as_ptr(),
                    arena.at.as_ptr().add(arena.used),
                    b.len(),
                );
            }
            arena.used += b.len();
        }
        prefetch_for_write(arena);
        // SAFETY: `len` bytes from `start` were just written and stay mapped while the
        // borrow of the arena lasts (for the call below).
        let copy = unsafe { std::slice::from_raw_parts(arena.at.as_ptr().add(start), len) };
        Some(lend(IoSlice::new(copy)))
    })
}

/// Bytes after the last copy asked into the cache for writing ([`prefetch_for_write`]): a
/// response head and its `Date` line.
const PREFETCH: usize = 512;

/// Asks the CPU to bring the arena's next fresh bytes into its cache, ready to be written:
/// the next copy otherwise writes cache lines the arena's mapping last touched when it was
/// populated, long out of the cache (the copy of a ~280-byte head was ~115 ns of a 68 KB
/// hit: bench/RESULTS.md, "thirteenth stop: kernel"); the fetch overlaps this response's
/// system calls. A hint only: it never faults, and nothing past the mapping is asked.
fn prefetch_for_write(arena: &Arena) {
    #[cfg(target_arch = "x86_64")]
    {
        let end = (arena.used + PREFETCH).min(ARENA);
        let mut at = arena.used & !63;
        while at < end {
            // SAFETY: a prefetch hint reads and writes nothing and never faults; `at` lies
            // inside the mapping (below `ARENA`).
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(
                    arena.at.as_ptr().add(at).cast::<i8>(),
                );
            }
            at += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = arena;
}

/// Where a copy of `len` bytes (at most [`NO_CROSSING`]) goes when the arena's fresh bytes
/// start at `used`: there, or at the next [`NO_CROSSING`] boundary if it would cross one.
fn start_of(used: usize, len: usize) -> usize {
    if used % NO_CROSSING + len > NO_CROSSING {
        used.next_multiple_of(NO_CROSSING)
    } else {
        used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each copy gets fresh bytes: a later copy never lands on an earlier one.
    #[test]
    fn copies_never_share_bytes() {
        let head = [7u8; 1000];
        let mut seen: Vec<(usize, usize)> = Vec::new();
        for _ in 0..200 {
            let (at, len) = with_copy(&[IoSlice::new(&head)], |c| {
                assert_eq!(&*c, &head[..]);
                (c.as_ptr() as usize, c.len())
            })
            .expect("an arena");
            assert!(
                seen.iter().all(|&(a, l)| at + len <= a || a + l <= at),
                "overlap"
            );
            seen.push((at, len));
        }
        assert!(with_copy(&[IoSlice::new(&[0u8; MAX_COPY + 1])], |_| ()).is_none());
    }

    /// A copy is never split over two pages (two pipe buffers), whatever the sizes before
    /// it, a whole page included; across more than one arena mapping.
    #[test]
    fn a_copy_never_crosses_a_page() {
        let sizes = [307usize, 1, 4096, 1000, 3000, 4095, 2];
        let mut total = 0;
        for i in 0..2000 {
            let head = vec![(i % 251) as u8; sizes[i % sizes.len()]];
            let (at, len) = with_copy(&[IoSlice::new(&head)], |c| {
                assert_eq!(&*c, &head[..]);
                (c.as_ptr() as usize, c.len())
            })
            .expect("an arena");
            assert_eq!(
                at / NO_CROSSING,
                (at + len - 1) / NO_CROSSING,
                "copy {i} crosses"
            );
            total += len;
        }
        assert!(total > 2 * ARENA, "the test went past one arena");
    }
}
