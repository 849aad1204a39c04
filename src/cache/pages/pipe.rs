//! The pipes stored bodies' pages go through to a socket: a bounded pool ([`Pipe::take`]) and
//! the filling of one ([`Pipe::fill`]: a response head copied, then a stored body's pages lent
//! by reference, in one vmsplice(2)). What may be lent is `pages.rs`'s business; this file
//! only lends what [`stored_run`] says lies in a live stored mapping.

use std::cell::Cell;
use std::io::{self, IoSlice};
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::{Span, arena, stored_run};

/// Bytes a pipe holds at most (F_SETPIPE_SZ; the default, 64 KiB, where it is refused): a
/// response head and a few 64 KiB pieces of a body at once.
pub const PIPE_SIZE: usize = 256 * 1024;

/// Pipes lent to connections at most; past it stored bodies go out with plain writes
/// (counter `splice_fallback`). 256 pipes of 256 KiB are the 64 MiB an unprivileged user
/// may hold in pipes before the kernel shrinks new ones (`fs.pipe-user-pages-soft`, shared
/// with the user's other processes: a shrunken pipe is not lent, [`MIN_PIPE_SIZE`]).
pub const MAX_PIPES: usize = 256;

/// Empty pipes kept for the next connection, at most (the rest are closed).
const IDLE_PIPES: usize = 64;

/// Smallest pipe lent (the kernel's default size): past `fs.pipe-user-pages-soft` an
/// unprivileged user's new pipes have 2 pages, which would carry a body 8 KiB per two system
/// calls; such a pipe is closed and the body copied (counter `splice_fallback`).
const MIN_PIPE_SIZE: usize = 64 * 1024;

/// After the kernel refused a pipe (or gave a shrunken one), new pipes are not asked for
/// this long: each write meanwhile is copied at once (idle pipes are still lent).
const REFUSED_BACKOFF_MS: u64 = 1000;

/// When the kernel last refused a pipe ([`crate::clock::now_ms`]; 0: never).
static REFUSED_AT: AtomicU64 = AtomicU64::new(0);

/// Pipes lent now.
static LENT: AtomicUsize = AtomicUsize::new(0);

/// Empty pipes kept for reuse.
static IDLE: Mutex<Vec<Fds>> = Mutex::new(Vec::new());

thread_local! {
    /// The empty pipe this thread gave back last, taken again first: a thread lending one
    /// response after another takes and gives back the same pipe without the [`IDLE`] lock
    /// (one pipe per thread beside [`IDLE_PIPES`]; closed when the thread ends).
    static SPARE: Cell<Option<Fds>> = const { Cell::new(None) };
}

/// Pipes lent to connections now (gauge `n_splice_pipe`).
pub fn pipes_lent() -> u64 {
    LENT.load(Ordering::Relaxed) as u64
}

/// A pipe's two ends.
struct Fds {
    read: OwnedFd,
    write: OwnedFd,
}

impl Fds {
    fn new() -> io::Result<Fds> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid array of two ints the kernel fills.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just opened by pipe2 and are owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor we own; no memory involved.
        let size = unsafe {
            libc::fcntl(
                write.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                PIPE_SIZE as libc::c_int,
            )
        };
        // Refused (a user near its pipe allowance, `fs.pipe-user-pages-soft`): the default
        // size still works, a pipe the kernel shrank (past the allowance: 2 pages) does not.
        if size < 0 {
            // SAFETY: fcntl on a descriptor we own; no memory involved.
            let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
            if size < MIN_PIPE_SIZE as libc::c_int {
                return Err(io::Error::other(
                    "pipe shrunk: over fs.pipe-user-pages-soft",
                ));
            }
        }
        Ok(Fds { read, write })
    }
}

/// A pipe lent to one connection: what was put in ([`Pipe::fill`]) leaves only through its
/// reading end ([`Pipe::reader`]), in order.
pub struct Pipe {
    fds: ManuallyDrop<Fds>,
    /// Bytes in the pipe now.
    held: usize,
}

impl Pipe {
    /// An empty pipe from the pool (or a new one); `None` when [`MAX_PIPES`] are lent, or the
    /// kernel refuses one or gives one below [`MIN_PIPE_SIZE`] (and for
    /// [`REFUSED_BACKOFF_MS`] after, unless an idle one is in the pool).
    pub fn take() -> Option<Pipe> {
        if LENT.fetch_add(1, Ordering::Relaxed) >= MAX_PIPES {
            LENT.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let idle = SPARE
            .try_with(Cell::take)
            .ok()
            .flatten()
            .or_else(|| IDLE.lock().ok().and_then(|mut v| v.pop()));
        let fds = match idle {
            Some(fds) => Ok(fds),
            None => {
                let refused = REFUSED_AT.load(Ordering::Relaxed);
                if refused != 0
                    && crate::clock::now_ms().saturating_sub(refused) < REFUSED_BACKOFF_MS
                {
                    Err(io::ErrorKind::WouldBlock.into())
                } else {
                    Fds::new().inspect_err(|_| {
                        REFUSED_AT.store(crate::clock::now_ms().max(1), Ordering::Relaxed);
                    })
                }
            }
        };
        match fds {
            Ok(fds) => Some(Pipe {
                fds: ManuallyDrop::new(fds),
                held: 0,
            }),
            Err(_) => {
                LENT.fetch_sub(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Bytes in the pipe now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The end the bytes leave by (to splice(2) to a socket).
    pub fn reader(&self) -> BorrowedFd<'_> {
        self.fds.read.as_fd()
    }

    /// `n` bytes left by [`Pipe::reader`].
    pub fn drained(&mut self, n: usize) {
        self.held -= n.min(self.held);
    }

    /// Puts `copied` (copied: heap memory, a response head) and then as much as fits of
    /// `lent` into the pipe. Of `lent`, only the slices from the first that lie inside stored
    /// bodies' mappings ([`stored_run`]) are taken, by reference; the caller keeps them alive
    /// for the call (the kernel holds the pages after):
    /// a short `copied` (up to `arena::MAX_COPY` bytes: a head) is copied into this thread's
    /// arena (`arena.rs`) and lent with the stored slices in one vmsplice(2); a longer one is
    /// written into the pipe (writev(2)), then the slices vmspliced.
    ///
    /// Returns the bytes put in (of `copied`, then of `lent`, in order) and of those the ones
    /// lent.
    pub fn fill(
        &mut self,
        copied: &[IoSlice<'_>],
        lent: &[IoSlice<'_>],
    ) -> io::Result<(usize, usize)> {
        let run = stored_run(lent);
        self.fill_checked(copied, &lent[..run])
    }

    /// [`Pipe::fill`] with a write already split by [`span`]: its copied slices, then its
    /// stored run (checked there, under the same lock as the split).
    pub fn fill_span(&mut self, span: &Span<'_, '_>) -> io::Result<(usize, usize)> {
        self.fill_checked(span.copied(), span.stored())
    }

    /// [`Pipe::fill`] once `lent` is known to lie inside stored bodies' mappings, every slice.
    fn fill_checked(
        &mut self,
        copied: &[IoSlice<'_>],
        lent: &[IoSlice<'_>],
    ) -> io::Result<(usize, usize)> {
        let write = self.fds.write.as_raw_fd();
        let want: usize = copied.iter().map(|b| b.len()).sum();
        let run = lent.len().min(libc::UIO_MAXIOV as usize - 1);
        if want > 0
            && run > 0
            && let Some(done) = arena::with_copy(copied, |copy| {
                let mut iov: smallvec::SmallVec<[IoSlice<'_>; 20]> =
                    smallvec::SmallVec::with_capacity(run + 1);
                iov.push(copy);
                iov.extend_from_slice(&lent[..run]);
                // SAFETY: the copy lies in the arena, never written again and unmapped, not
                // reused; the stored slices lie in live stored mappings (checked by the
                // caller, `fill` or `span`, and kept alive by it for the call): see the
                // vmsplice below.
                unsafe {
                    libc::vmsplice(
                        write,
                        iov.as_ptr().cast(),
                        iov.len(),
                        libc::SPLICE_F_NONBLOCK,
                    )
                }
            })
        {
            if done < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = done as usize;
            self.held += n;
            return Ok((n, n.saturating_sub(want)));
        }
        let put = self.put_copied(copied, want)?;
        if put < want || run == 0 {
            return Ok((put, 0));
        }
        // SAFETY: the slices are inside live stored mappings (checked by the caller, `fill`
        // or `span`, and kept alive by it for the call), which are never written again and are unmapped,
        // not reused, when freed: the references the pipe takes to their pages stay valid and
        // their bytes unchanged for as long as the kernel holds them. No SPLICE_F_GIFT: the
        // pages stay ours (and shared).
        let n =
            unsafe { libc::vmsplice(write, lent.as_ptr().cast(), run, libc::SPLICE_F_NONBLOCK) };
        if n < 0 {
            // A full pipe takes nothing more now; what was copied in stands (an error is
            // only one when nothing went in).
            if put > 0 {
                return Ok((put, 0));
            }
            return Err(io::Error::last_os_error());
        }
        self.held += n as usize;
        Ok((put + n as usize, n as usize))
    }

    /// Puts `copied` (`want` bytes in all) into the pipe: copied into this thread's arena and
    /// lent (vmsplice(2)) when short, else written (writev(2)). How many went in.
    fn put_copied(&mut self, copied: &[IoSlice<'_>], want: usize) -> io::Result<usize> {
        if want == 0 {
            return Ok(0);
        }
        let write = self.fds.write.as_raw_fd();
        let n = arena::with_copy(copied, |copy| {
            // SAFETY: the copy lies in the arena, never written again and unmapped, not
            // reused (`arena.rs`); one iovec the kernel only reads.
            unsafe {
                libc::vmsplice(
                    write,
                    (&copy as *const IoSlice<'_>).cast(),
                    1,
                    libc::SPLICE_F_NONBLOCK,
                )
            }
        })
        .unwrap_or_else(|| {
            // SAFETY: `copied` is a valid array of `IoSlice`s (laid out as iovec) the kernel
            // only reads; the descriptor is ours.
            unsafe {
                libc::writev(
                    write,
                    copied.as_ptr().cast(),
                    copied.len().min(libc::UIO_MAXIOV as usize) as libc::c_int,
                )
            }
        });
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.held += n as usize;
        Ok(n as usize)
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        LENT.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: `fds` is taken once, here, and `self` is not used after.
        let fds = unsafe { ManuallyDrop::take(&mut self.fds) };
        // A pipe with bytes in it belongs to its connection's stream: closed with it.
        if self.held != 0 {
            return;
        }
        // This thread's spare first; if it has one, the pool (a thread that is ending
        // closes the pipe).
        let Ok(Some(fds)) = SPARE.try_with(|spare| match spare.take() {
            None => {
                spare.set(Some(fds));
                None
            }
            had => {
                spare.set(had);
                Some(fds)
            }
        }) else {
            return;
        };
        if let Ok(mut idle) = IDLE.lock()
            && idle.len() < IDLE_PIPES
        {
            idle.push(fds);
        }
    }
}

#[cfg(test)]
pub(in crate::cache) mod tests {
    use super::*;
    use crate::cache::pages::{forget, register};

    pub(in crate::cache) fn read_all(pipe: &Pipe, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        let mut got = 0;
        while got < n {
            // SAFETY: reads into our own buffer, within its length.
            let r = unsafe {
                libc::read(
                    pipe.reader().as_raw_fd(),
                    out[got..].as_mut_ptr().cast(),
                    n - got,
                )
            };
            assert!(r > 0, "pipe read {r}");
            got += r as usize;
        }
        out
    }

    /// Copied bytes first, then the lent ones; a slice not in a stored mapping ends the run
    /// (it is never lent), and the pipe's bytes come out in order.
    #[test]
    fn a_pipe_carries_copies_then_stored_pages() {
        let body = vec![9u8; 70_000];
        register(body.as_ptr() as usize, body.len());
        let other = vec![5u8; 1000];
        let head = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        let mut pipe = Pipe::take().expect("a pipe");
        let (put, lent) = pipe
            .fill(
                &[IoSlice::new(&head)],
                &[
                    IoSlice::new(&body[..65_536]),
                    IoSlice::new(&other),
                    IoSlice::new(&body[65_536..]),
                ],
            )
            .expect("fill");
        assert_eq!(lent, 65_536);
        assert_eq!(put, head.len() + 65_536);
        assert_eq!(pipe.held(), put);
        // The head was copied (the arena's pages are lent, not the caller's buffer).
        let sent = head.clone();
        let mut head = head;
        head.fill(b'#');
        let out = read_all(&pipe, put);
        forget(body.as_ptr() as usize, body.len());
        assert_eq!(&out[..sent.len()], &sent[..]);
        assert!(out[head.len()..].iter().all(|&b| b == 9));
        pipe.drained(put);
        assert_eq!(pipe.held(), 0);
    }

    /// A body sent again is lent again (vmsplice(2) of its pages per response, after the
    /// head): the same bytes, in order, every time; and from inside the body too.
    #[test]
    fn a_body_sent_again_is_lent_again() {
        let body: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
        let at = body.as_ptr() as usize;
        register(at, body.len());
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 70000\r\n\r\n".to_vec();
        let lent = [IoSlice::new(&body[..65_536]), IoSlice::new(&body[65_536..])];
        let mut want = head.clone();
        want.extend_from_slice(&body);
        for send in 0..3 {
            let mut pipe = Pipe::take().expect("a pipe");
            let (put, lent_n) = pipe.fill(&[IoSlice::new(&head)], &lent).expect("fill");
            assert_eq!((put, lent_n), (want.len(), body.len()), "send {send}");
            assert_eq!(read_all(&pipe, put), want, "send {send}");
            pipe.drained(put);
        }
        let inner = [IoSlice::new(&body[100..])];
        let mut pipe = Pipe::take().expect("a pipe");
        let (put, _) = pipe.fill(&[], &inner).expect("fill");
        assert_eq!(read_all(&pipe, put), &body[100..]);
        pipe.drained(put);
        forget(at, body.len());
    }

    /// An empty pipe given back is this thread's spare: the next take on the thread gets the
    /// same pipe (no pool lock); one given back with bytes in it is closed, never reused.
    #[test]
    fn a_thread_takes_back_the_pipe_it_gave_back() {
        let pipe = Pipe::take().expect("a pipe");
        let fd = pipe.reader().as_raw_fd();
        drop(pipe);
        let mut pipe = Pipe::take().expect("a pipe");
        assert_eq!(pipe.reader().as_raw_fd(), fd, "the spare again");
        let body = vec![8u8; 5_000];
        register(body.as_ptr() as usize, body.len());
        let (put, _) = pipe.fill(&[], &[IoSlice::new(&body)]).expect("fill");
        forget(body.as_ptr() as usize, body.len());
        assert_eq!(put, body.len());
        drop(pipe);
        // The next pipe has nothing in it: the one with bytes was not kept.
        let pipe = Pipe::take().expect("a pipe");
        let mut byte = [0u8; 1];
        // SAFETY: reads at most one byte into our own buffer from a descriptor we hold.
        let n = unsafe { libc::read(pipe.reader().as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
        assert_eq!(n, -1, "an empty pipe (non-blocking read: EAGAIN)");
        assert_eq!(pipe.held(), 0);
    }

    /// A prefix longer than the arena takes is written into the pipe, then the stored bytes
    /// lent after it, in order.
    #[test]
    fn a_long_prefix_is_written_then_the_body_lent() {
        let body = vec![4u8; 20_000];
        register(body.as_ptr() as usize, body.len());
        let long = vec![6u8; arena::MAX_COPY + 1];
        let mut pipe = Pipe::take().expect("a pipe");
        let (put, lent) = pipe
            .fill(&[IoSlice::new(&long)], &[IoSlice::new(&body)])
            .expect("fill");
        assert_eq!((put, lent), (long.len() + body.len(), body.len()));
        let out = read_all(&pipe, put);
        forget(body.as_ptr() as usize, body.len());
        assert_eq!(&out[..long.len()], &long[..]);
        assert_eq!(&out[long.len()..], &body[..]);
        pipe.drained(put);
    }
}
