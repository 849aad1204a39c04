//! Stored bodies' pages lent to the kernel: which memory belongs to a body's own mapping
//! (`body.rs`), and pipes that carry those pages, by reference, towards a socket
//! (`pages/pipe.rs`).
//!
//! Why: a hit of a 68 KB page spent half its CPU in the kernel's copy of the body into the
//! socket (bench/RESULTS.md, "copy-free hits"). vmsplice(2) puts the pages of a user buffer
//! into a pipe *by reference* (no copy), and splice(2) hands the pipe's pages to the socket,
//! which keeps references to them until the peer has acknowledged the bytes. That is only
//! safe for memory nobody writes again while the kernel holds it: a body's mapping is written
//! once when the body is stored, only read after, and unmapped (never reused by an allocator)
//! when its last reference goes — the kernel's references then keep the pages, with the
//! body's bytes, alive until the socket is done with them. Heap memory (a response head, a
//! decoded or filtered body, a body below `MAPPED_MIN`) is reused as soon as it is freed, so
//! it is never vmspliced itself: [`Pipe::fill`] copies it — a short prefix such as a response
//! head into this thread's arena (`pages/arena.rs`, pages never written twice), lent in the
//! same vmsplice as the body; a longer one into the pipe (write(2)) — and lends only slices
//! [`is_stored`] knows.
//!
//! Every response lends its body's pages again (one vmsplice of head and body, then one
//! splice). Holding a hot body's pages in a pipe of its own and tee(2)ing them per response
//! (three system calls) was measured no cheaper on this kernel, and was removed
//! (bench/RESULTS.md, "twelfth stop: send").
//!
//! Pipes come from a bounded pool ([`Pipe::take`]): at most [`MAX_PIPES`] lent at once (gauge
//! `n_splice_pipe`), each [`PIPE_SIZE`] bytes (at least `MIN_PIPE_SIZE`: a user past its
//! pipe allowance gets none, and its bodies are copied); a pipe goes back when it is empty
//! (to its thread's spare slot, taken again first without the pool's lock, else to the pool),
//! and one dropped with bytes still in it is closed (its pages freed with it).

mod arena;
mod pipe;

#[cfg(test)]
pub(super) use pipe::tests;
pub use pipe::{MAX_PIPES, PIPE_SIZE, Pipe, pipes_lent};

use std::collections::BTreeMap;
use std::io::IoSlice;
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest body whose pages are lent: a bigger one is copied into the socket, every
/// write of it (whole, a range, an FLV or MP4 cut). On this kernel's loopback, lending the
/// pages of a body of a megabyte or more cost as much CPU as copying them or more, and halved
/// what a client received per second: `bench/ceiling_modes.sh` with 10 connections measured
/// lending (`splice1`) against copying (`writev`) at 1.26-1.30x the requests per CPU-second
/// for 512 KiB bodies, 0.53-0.55x for 1 MiB, 0.66-0.67x for 2 MiB, 0.87-0.92x for 4 MiB and
/// 1.09-1.19x for 21 MiB, with 0.45-0.56x the bytes per second from 1 MiB on
/// (bench/RESULTS.md, "seventeenth stop").
pub const LENT_MAX: usize = 512 * 1024;

/// The live mappings of stored bodies: start address → end address.
static MAPPED: RwLock<BTreeMap<usize, usize>> = RwLock::new(BTreeMap::new());

/// Mappings in [`MAPPED`]: a plain load spares the lock while there are none.
static MAPPED_COUNT: AtomicUsize = AtomicUsize::new(0);

/// `len` bytes at `at` are a stored body's mapping from now on: complete, never written
/// again, unmapped only after [`forget`]. A body above [`LENT_MAX`] is not taken (its pages
/// are never lent).
pub(super) fn register(at: usize, len: usize) {
    if len > LENT_MAX {
        return;
    }
    if let Ok(mut m) = MAPPED.write() {
        m.insert(at, at + len);
        MAPPED_COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// The mapping of `len` bytes at `at` is about to be unmapped (responses on their way keep
/// their page references).
pub(super) fn forget(at: usize, len: usize) {
    if len > LENT_MAX {
        return;
    }
    let removed = match MAPPED.write() {
        Ok(mut m) => m.remove(&at),
        Err(_) => None,
    };
    if removed.is_some() {
        MAPPED_COUNT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether `slice` lies inside a stored body's mapping (so its pages may be lent to a pipe
/// while the `Bytes` it comes from is alive).
pub fn is_stored(slice: &[u8]) -> bool {
    stored_run(&[IoSlice::new(slice)]) == 1
}

fn inside(m: &BTreeMap<usize, usize>, slice: &[u8]) -> bool {
    let at = slice.as_ptr() as usize;
    m.range(..=at)
        .next_back()
        .is_some_and(|(_, &end)| at + slice.len() <= end)
}

/// A write's slices as a pipe takes them: `copied`, none of them inside a stored body's
/// mapping, then `stored`, every one inside one. Only [`span`] makes one, so its `stored`
/// slices are known to be lendable.
pub struct Span<'a, 'b> {
    copied: &'a [IoSlice<'b>],
    stored: &'a [IoSlice<'b>],
}

impl<'a, 'b> Span<'a, 'b> {
    /// The slices before the stored ones (all of them when none is stored).
    pub fn copied(&self) -> &'a [IoSlice<'b>] {
        self.copied
    }

    /// The run of slices inside stored bodies' mappings after [`Span::copied`] (empty when
    /// there is none).
    pub fn stored(&self) -> &'a [IoSlice<'b>] {
        self.stored
    }
}

/// Where the stored slices of `bufs` start and how far they run, under one lock for the whole
/// write: a lent response (a head, then a body) asked the registry once per slice and again
/// for the run, four read locks and tree searches per write, ~110 ns of a 68 KB hit's user
/// time (bench/RESULTS.md, "thirteenth stop: kernel").
pub fn span<'a, 'b>(bufs: &'a [IoSlice<'b>]) -> Span<'a, 'b> {
    let none = Span {
        copied: bufs,
        stored: &[],
    };
    if MAPPED_COUNT.load(Ordering::Relaxed) == 0 {
        return none;
    }
    let Ok(m) = MAPPED.read() else {
        return none;
    };
    let lendable = |b: &IoSlice<'_>| !b.is_empty() && inside(&m, b);
    let first = bufs.iter().position(lendable).unwrap_or(bufs.len());
    let run = bufs[first..].iter().take_while(|b| lendable(b)).count();
    Span {
        copied: &bufs[..first],
        stored: &bufs[first..first + run],
    }
}

/// How many of `bufs`, from the first, lie inside stored bodies' mappings (one lock for all).
pub fn stored_run(bufs: &[IoSlice<'_>]) -> usize {
    if MAPPED_COUNT.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    let Ok(m) = MAPPED.read() else {
        return 0;
    };
    bufs.iter()
        .take_while(|b| !b.is_empty() && inside(&m, b))
        .count()
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn only_registered_memory_is_lent() {
        let heap = vec![3u8; 100_000];
        assert!(!is_stored(&heap));
        let (at, len) = (heap.as_ptr() as usize, heap.len());
        register(at, len);
        assert!(is_stored(&heap[10..90_000]));
        assert!(is_stored(&heap));
        forget(at, len);
        assert!(!is_stored(&heap));
    }

    /// A body above `LENT_MAX` is never taken: its pages are copied, not lent.
    #[test]
    fn a_body_above_the_lent_maximum_is_never_lent() {
        let big = vec![4u8; LENT_MAX + 1];
        let (at, len) = (big.as_ptr() as usize, big.len());
        register(at, len);
        assert!(!is_stored(&big));
        assert!(!is_stored(&big[..100_000]));
        forget(at, len);
        let edge = vec![4u8; LENT_MAX];
        register(edge.as_ptr() as usize, edge.len());
        assert!(is_stored(&edge));
        forget(edge.as_ptr() as usize, edge.len());
        assert!(!is_stored(&edge));
    }

    /// A write splits where its stored slices start, and the run stops at the first slice
    /// that is not stored (or empty); nothing is stored once the mapping is forgotten.
    #[test]
    fn a_span_is_the_copied_slices_then_the_stored_run() {
        let body = vec![1u8; 100_000];
        let head = vec![2u8; 300];
        let other = vec![3u8; 10];
        register(body.as_ptr() as usize, body.len());
        let bufs = [
            IoSlice::new(&head),
            IoSlice::new(&other),
            IoSlice::new(&body[..50_000]),
            IoSlice::new(&body[50_000..]),
            IoSlice::new(&[]),
            IoSlice::new(&body[..10]),
        ];
        let s = span(&bufs);
        assert_eq!((s.copied().len(), s.stored().len()), (2, 2));
        assert_eq!(s.stored()[1].len(), 50_000);
        let s = span(&bufs[2..]);
        assert_eq!((s.copied().len(), s.stored().len()), (0, 2));
        let s = span(&bufs[..2]);
        assert_eq!((s.copied().len(), s.stored().len()), (2, 0));
        forget(body.as_ptr() as usize, body.len());
        let s = span(&bufs);
        assert_eq!((s.copied().len(), s.stored().len()), (6, 0));
    }
}
