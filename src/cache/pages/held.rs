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
//! A body gets its pipe at the second send from its start since it last tried
//! ([`HOT_SENDS`]), when it fits one ([`MAX_HELD`]). At most [`MAX_HELD_PIPES`] are held: the
//! pipes are slots of a CLOCK ([`Clock`]). A send from a held pipe marks its slot used (one
//! relaxed load, and a store only when the mark was clear: no lock, no write shared by the
//! workers on every hit); a newly hot body takes a free slot, or sweeps the hand round at most
//! once, clearing marks, and takes the first slot not sent from since the hand last passed it
//! — that body's pipe is given up (counter `held_pipe_given_up`) and it starts counting its
//! sends again. When every slot was sent from since, the newcomer gets none this time (and
//! counts again): a body displaces another only once that one went a whole sweep unsent. The
//! pipe is closed when the body's mapping is forgotten (before it is unmapped, `body.rs`) or
//! given up — responses on their way keep their page references, as with vmsplice. Only the
//! reading end is kept: tee(2) never takes bytes out of it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use arc_swap::ArcSwapOption;

/// Sends from a body's start after which it asks for a pipe: a body sent once pays nothing.
const HOT_SENDS: u32 = 2;

/// Largest body held in a pipe (a pipe of 32 pages: the responses of a site's hot pages; a
/// larger body is sent by vmsplice, and a connection's pipe could not take it whole anyway).
pub(super) const MAX_HELD: usize = 128 * 1024;

/// Bodies held at most at once: one descriptor each, and at most 32 pages each of the
/// pipe buffers an unprivileged user may hold (`fs.pipe-user-pages-soft`).
pub const MAX_HELD_PIPES: usize = 128;

/// Bodies held in pipes now (pipes open: a given-up one closes when the last response that
/// took it in hand is through with it).
static HELD: AtomicUsize = AtomicUsize::new(0);

/// The process's held pipes.
pub(super) static CLOCK: Clock<MAX_HELD_PIPES> = Clock::new();

/// Bodies held in pipes now.
pub fn held_pipes() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// Held pipes given up for a body hotter now (counter `held_pipe_given_up`).
pub fn held_pipes_given_up() -> u64 {
    CLOCK.given_up.load(Ordering::Relaxed)
}

/// `N` slots for held pipes, replaced by CLOCK (see the module docs).
pub(super) struct Clock<const N: usize> {
    /// Per slot: sent from since the hand last passed.
    used: [AtomicBool; N],
    slots: Mutex<Slots>,
    given_up: AtomicU64,
}

struct Slots {
    /// At most `N`; a slot whose pipe is gone (its mapping forgotten) is free.
    held: Vec<Slot>,
    hand: usize,
}

struct Slot {
    /// The start of the body's mapping (its [`Hot`] is found by it).
    at: usize,
    pipe: Weak<BodyPipe>,
}

impl<const N: usize> Clock<N> {
    pub(super) const fn new() -> Self {
        Clock {
            used: [const { AtomicBool::new(false) }; N],
            slots: Mutex::new(Slots {
                held: Vec::new(),
                hand: 0,
            }),
            given_up: AtomicU64::new(0),
        }
    }

    fn touch(&self, slot: usize) {
        if let Some(used) = self.used.get(slot)
            && !used.load(Ordering::Relaxed)
        {
            used.store(true, Ordering::Relaxed);
        }
    }

    /// A slot for the body at `at`: a free one, or one whose body was not sent from since
    /// the hand last passed (its pipe taken from its [`Hot`], found by `owner`). `None`: every
    /// slot was sent from since.
    fn claim<'a>(
        &self,
        slots: &mut Slots,
        owner: impl Fn(usize) -> Option<&'a Hot>,
    ) -> Option<usize> {
        if slots.held.len() < N {
            slots.held.push(Slot {
                at: 0,
                pipe: Weak::new(),
            });
            return Some(slots.held.len() - 1);
        }
        for _ in 0..N {
            let i = slots.hand;
            slots.hand = (i + 1) % N;
            let Some(pipe) = slots.held[i].pipe.upgrade() else {
                return Some(i);
            };
            if self.used[i].swap(false, Ordering::Relaxed) {
                continue;
            }
            if let Some(hot) = owner(slots.held[i].at)
                && hot
                    .pipe
                    .load()
                    .as_ref()
                    .is_some_and(|held| Arc::ptr_eq(held, &pipe))
            {
                hot.pipe.store(None);
                hot.sends.store(0, Ordering::Relaxed);
            }
            self.given_up.fetch_add(1, Ordering::Relaxed);
            return Some(i);
        }
        None
    }
}

/// A stored mapping's sends from its start and, once hot, its pipe.
#[derive(Default)]
pub(super) struct Hot {
    sends: AtomicU32,
    pipe: ArcSwapOption<BodyPipe>,
    /// The kernel refused a pipe for it (none, or too small for the body): not asked again.
    refused: AtomicBool,
}

impl Hot {
    /// The pipe holding the `len` bytes at `at` (the whole mapping this belongs to) for a
    /// send from its start: the one made before, or a new one at the [`HOT_SENDS`]th send
    /// when `clock` has a slot for it (system calls: the caller does not hold the mappings'
    /// lock for writing). `owner` finds the [`Hot`] of another mapping by its start (whose
    /// pipe may be given up). The mapping must stay mapped for the call (the caller holds a
    /// slice of it).
    pub(super) fn pipe<'a, const N: usize>(
        &self,
        clock: &Clock<N>,
        at: usize,
        len: usize,
        owner: impl Fn(usize) -> Option<&'a Hot>,
    ) -> Option<Arc<BodyPipe>> {
        if let Some(held) = self.pipe.load_full() {
            clock.touch(held.slot);
            return Some(held);
        }
        if len > MAX_HELD
            || self.refused.load(Ordering::Relaxed)
            || self.sends.fetch_add(1, Ordering::Relaxed).saturating_add(1) < HOT_SENDS
        {
            return None;
        }
        let mut slots = clock.slots.lock().ok()?;
        // Another thread may have made one meanwhile.
        if let Some(held) = self.pipe.load_full() {
            return Some(held);
        }
        let Some(slot) = clock.claim(&mut slots, owner) else {
            self.sends.store(0, Ordering::Relaxed);
            return None;
        };
        let Some(made) = BodyPipe::fill(at, len, slot).map(Arc::new) else {
            self.refused.store(true, Ordering::Relaxed);
            slots.held[slot] = Slot {
                at: 0,
                pipe: Weak::new(),
            };
            return None;
        };
        slots.held[slot] = Slot {
            at,
            pipe: Arc::downgrade(&made),
        };
        clock.used[slot].store(true, Ordering::Relaxed);
        self.pipe.store(Some(made.clone()));
        Some(made)
    }
}

/// A pipe holding a stored body's pages (its reading end; the writing end is closed once
/// the body is in).
pub(super) struct BodyPipe {
    read: OwnedFd,
    /// Bytes it holds: the whole body.
    pub(super) len: usize,
    /// Its slot in the [`Clock`].
    slot: usize,
}

impl BodyPipe {
    /// `None`: the kernel refused (no pipe, or too small for the body).
    fn fill(at: usize, len: usize, slot: usize) -> Option<BodyPipe> {
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
        if n != len as isize {
            return None;
        }
        HELD.fetch_add(1, Ordering::Relaxed);
        Some(BodyPipe { read, len, slot })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes `pipe` holds, teed into a pipe of the test's and read back.
    fn teed(pipe: &BodyPipe) -> Vec<u8> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid array of two ints the kernel fills.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors were just opened by pipe2 and are owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        assert_eq!(
            pipe.tee_into(write.as_raw_fd(), pipe.len).unwrap(),
            pipe.len
        );
        let mut out = vec![0u8; pipe.len];
        let mut got = 0;
        while got < out.len() {
            // SAFETY: reads into our own buffer, within its length.
            let r = unsafe {
                libc::read(
                    read.as_raw_fd(),
                    out[got..].as_mut_ptr().cast(),
                    out.len() - got,
                )
            };
            assert!(r > 0, "pipe read {r}");
            got += r as usize;
        }
        out
    }

    /// Four slots, five bodies: the fifth, hot while every held one was just sent, gets no
    /// pipe on that sweep (nothing given up); once three of them are sent again it takes
    /// the slot of the one that was not, whose pipe is given up (counted) and which must be
    /// hot again to get one back — displacing the coldest in its turn.
    #[test]
    fn a_newly_hot_body_displaces_a_cold_one() {
        let bodies: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i + 1; 8192]).collect();
        let hots: Vec<Hot> = (0..5).map(|_| Hot::default()).collect();
        let at = |i: usize| bodies[i].as_ptr() as usize;
        let clock = Clock::<4>::new();
        let owner = |a: usize| (0..5).find(|&i| at(i) == a).map(|i| &hots[i]);
        let send = |i: usize| hots[i].pipe(&clock, at(i), bodies[i].len(), owner);
        let holds = |i: usize| hots[i].pipe.load().is_some();
        for (i, body) in bodies.iter().enumerate().take(4) {
            assert!(send(i).is_none(), "body {i}: sent once, no pipe");
            let pipe = send(i).expect("hot at the second send, a free slot");
            assert_eq!(&teed(&pipe), body);
        }
        // Every held body was sent since its pipe was made: the sweep clears their marks
        // and gives nothing up.
        assert!(send(4).is_none());
        assert!(send(4).is_none());
        assert_eq!(clock.given_up.load(Ordering::Relaxed), 0);
        assert!((0..4).all(holds));
        // Bodies 0, 1 and 3 are sent again (from their pipes); body 2 is not.
        for i in [0, 1, 3] {
            assert_eq!(teed(&send(i).expect("still held")), bodies[i]);
        }
        assert!(send(4).is_none(), "its count started again");
        let pipe = send(4).expect("body 2's slot");
        assert_eq!(teed(&pipe), bodies[4]);
        assert_eq!(clock.given_up.load(Ordering::Relaxed), 1);
        assert!(!holds(2), "the cold body's pipe was given up");
        assert!([0, 1, 3, 4].into_iter().all(holds));
        // Body 2 is hot again: it takes the slot of the one held body not sent since the
        // hand passed (body 0: only body 3 was sent after the last sweep cleared it).
        assert!(send(2).is_none());
        assert_eq!(teed(&send(2).expect("hot again")), bodies[2]);
        assert_eq!(clock.given_up.load(Ordering::Relaxed), 2);
        assert!(!holds(0));
        assert!([1, 2, 3, 4].into_iter().all(holds));
        // A body whose mapping is forgotten frees its slot for the next without giving it up.
        hots[1].pipe.store(None);
        assert!(send(0).is_none());
        assert_eq!(
            teed(&send(0).expect("the forgotten body's slot")),
            bodies[0]
        );
        assert_eq!(clock.given_up.load(Ordering::Relaxed), 2);
        assert!([0, 2, 3, 4].into_iter().all(holds));
    }
}
