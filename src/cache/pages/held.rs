//! A hot stored body's pages held in a pipe of its own, so that each response copies the
//! pipe's page references into the connection's pipe with tee(2) instead of vmsplice(2)ing
//! the body's memory again.
//!
//! Why: vmsplice(2) looks every page of the body up in the process's page tables and takes a
//! reference to it, per response (`gup_fast_fallback`: ~1.2 µs of a 68 KB hit's kernel time
//! on this machine); tee(2) takes the references the held pipe already has, one increment per
//! page (bench/ceiling.c `tee` against `splice1`, bench/RESULTS.md). The response head still
//! goes in by vmsplice (from the thread's arena, `arena.rs`): three system calls per response
//! instead of two, and less kernel time.
//!
//! A body gets its pipe at the second send from its start ([`HOT_SENDS`]), when it fits one
//! ([`MAX_HELD`]), while fewer than [`MAX_HELD_PIPES`] are held; the pipe is closed when the
//! body's mapping is forgotten (before it is unmapped, `body.rs`) — responses on their way
//! keep their page references, as with vmsplice. Only the reading end is kept: tee(2) never
//! takes bytes out of it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Sends from a body's start after which it gets a pipe: a body sent once pays nothing.
const HOT_SENDS: u32 = 2;

/// Largest body held in a pipe (a pipe of 32 pages: the responses of a site's hot pages; a
/// larger body is sent by vmsplice, and a connection's pipe could not take it whole anyway).
pub(super) const MAX_HELD: usize = 128 * 1024;

/// Bodies held at most at once: one descriptor each, and at most 32 pages each of the
/// pipe buffers an unprivileged user may hold (`fs.pipe-user-pages-soft`).
pub const MAX_HELD_PIPES: usize = 128;

/// Bodies held now.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Bodies held in pipes now.
pub fn held_pipes() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// A stored mapping's sends from its start and, once hot, its pipe (`None` inside: the
/// kernel refused one for it; not asked again).
#[derive(Default)]
pub(super) struct Hot {
    sends: AtomicU32,
    pipe: OnceLock<Option<Arc<BodyPipe>>>,
}

impl Hot {
    /// The pipe holding the `len` bytes at `at` (the whole mapping this belongs to) for a
    /// send from its start: the one made before, or a new one at the [`HOT_SENDS`]th send
    /// (system calls: the caller does not hold the mappings' lock). The mapping must stay
    /// mapped for the call (the caller holds a slice of it).
    pub(super) fn pipe(&self, at: usize, len: usize) -> Option<Arc<BodyPipe>> {
        if let Some(held) = self.pipe.get() {
            return held.clone();
        }
        if len > MAX_HELD
            || self.sends.fetch_add(1, Ordering::Relaxed).saturating_add(1) < HOT_SENDS
        {
            return None;
        }
        // At the bound: not marked, a later send may find room.
        let made = BodyPipe::new(at, len)?;
        // Another thread may have made one meanwhile: theirs stays, ours is closed.
        self.pipe.get_or_init(|| made).clone()
    }
}

/// A pipe holding a stored body's pages (its reading end; the writing end is closed once
/// the body is in).
pub(super) struct BodyPipe {
    read: OwnedFd,
    /// Bytes it holds: the whole body.
    pub(super) len: usize,
}

impl BodyPipe {
    /// `Some(None)`: the kernel refused (no pipe, or too small for the body): not asked
    /// again for this body. `None`: [`MAX_HELD_PIPES`] are held.
    fn new(at: usize, len: usize) -> Option<Option<Arc<BodyPipe>>> {
        if HELD.fetch_add(1, Ordering::Relaxed) >= MAX_HELD_PIPES {
            HELD.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let made = Self::fill(at, len).map(Arc::new);
        if made.is_none() {
            HELD.fetch_sub(1, Ordering::Relaxed);
        }
        Some(made)
    }

    fn fill(at: usize, len: usize) -> Option<BodyPipe> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid array of two ints the kernel fills.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: both descriptors were just opened by pipe2 and are owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // The default (16 pages) takes bodies up to 64 KiB; the kernel rounds up to a power
        // of two pages.
        if len > 64 * 1024 {
            // SAFETY: fcntl on a descriptor we own; no memory involved.
            let size =
                unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, len as libc::c_int) };
            if size < 0 || (size as usize) < len {
                return None;
            }
        }
        let iov = libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: len,
        };
        // SAFETY: `at..at + len` is a live stored mapping (the caller holds a slice of it for
        // the call), never written again and unmapped, not reused, when freed (`body.rs`):
        // the page references the pipe takes stay valid with unchanged bytes for as long as
        // it holds them. No SPLICE_F_GIFT: the pages stay the mapping's (and shared).
        let n = unsafe { libc::vmsplice(write.as_raw_fd(), &iov, 1, libc::SPLICE_F_NONBLOCK) };
        (n == len as isize).then_some(BodyPipe { read, len })
    }

    /// tee(2): duplicates the first `len` bytes (at most [`BodyPipe::len`]) into the pipe
    /// `to`, taking nothing out of this one; how many went (fewer when `to` has no room).
    pub(super) fn tee_into(&self, to: RawFd, len: usize) -> std::io::Result<usize> {
        // SAFETY: both descriptors are pipes open for the call (ours held by `self`, `to` by
        // the caller's `Pipe`); tee moves page references between them and touches no memory
        // of ours.
        let n = unsafe {
            libc::tee(
                self.read.as_raw_fd(),
                to,
                len.min(self.len),
                libc::SPLICE_F_NONBLOCK,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl Drop for BodyPipe {
    fn drop(&mut self) {
        HELD.fetch_sub(1, Ordering::Relaxed);
    }
}
