//! Stored bodies' pages lent to the kernel: which memory belongs to a body's own mapping
//! (`body.rs`), and pipes that carry those pages, by reference, towards a socket.
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
//! A hot body that fits one is also held in a pipe of its own (`pages/held.rs`), and its
//! responses copy the page references from there (tee(2)) rather than vmsplice its memory
//! again.
//!
//! Pipes come from a bounded pool ([`Pipe::take`]): at most [`MAX_PIPES`] lent at once (gauge
//! `n_splice_pipe`), each [`PIPE_SIZE`] bytes (at least [`MIN_PIPE_SIZE`]: a user past its
//! pipe allowance gets none, and its bodies are copied); a pipe goes back when it is empty,
//! and one dropped with bytes still in it is closed (its pages freed with it).

mod arena;
mod held;

pub use held::{MAX_HELD_PIPES, held_pipes, held_pipes_given_up};

use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Bytes a pipe holds at most (F_SETPIPE_SZ; the default, 64 KiB, where it is refused): a
/// response head and a few 64 KiB pieces of a body at once.
pub const PIPE_SIZE: usize = 256 * 1024;

/// Pipes lent to connections at most; past it stored bodies go out with plain writes
/// (counter `splice_fallback`). 256 pipes of 256 KiB are the 64 MiB an unprivileged user
/// may hold in pipes before the kernel shrinks new ones (`fs.pipe-user-pages-soft`, shared
/// with the user's other processes and the held pipes: a shrunken pipe is not lent,
/// [`MIN_PIPE_SIZE`]).
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

/// The live mappings of stored bodies: start address → end address, and the pipe holding the
/// body once it is hot (`pages/held.rs`).
static MAPPED: RwLock<BTreeMap<usize, Mapped>> = RwLock::new(BTreeMap::new());

/// A live stored mapping.
struct Mapped {
    end: usize,
    hot: held::Hot,
}

/// Mappings in [`MAPPED`]: a plain load spares the lock while there are none.
static MAPPED_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Pipes lent now.
static LENT: AtomicUsize = AtomicUsize::new(0);

/// Empty pipes kept for reuse.
static IDLE: Mutex<Vec<Fds>> = Mutex::new(Vec::new());

/// `len` bytes at `at` are a stored body's mapping from now on: complete, never written
/// again, unmapped only after [`forget`].
pub(super) fn register(at: usize, len: usize) {
    if let Ok(mut m) = MAPPED.write() {
        m.insert(
            at,
            Mapped {
                end: at + len,
                hot: held::Hot::default(),
            },
        );
        MAPPED_COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// The mapping at `at` is about to be unmapped (its held pipe, if any, is closed: responses
/// on their way keep their page references).
pub(super) fn forget(at: usize) {
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

fn inside(m: &BTreeMap<usize, Mapped>, slice: &[u8]) -> bool {
    let at = slice.as_ptr() as usize;
    m.range(..=at)
        .next_back()
        .is_some_and(|(_, mapped)| at + slice.len() <= mapped.end)
}

/// When `lent` starts at the start of a stored mapping: the pipe holding that body, once hot
/// (`pages/held.rs`), and how many bytes from the start `lent`'s first slices cover one after
/// the other in it.
fn held_for(lent: &[IoSlice<'_>]) -> Option<(Arc<held::BodyPipe>, usize)> {
    let first = lent.first()?;
    let at = first.as_ptr() as usize;
    let m = MAPPED.read().ok()?;
    let mapped = m.get(&at)?;
    let mut covered = 0;
    for b in lent {
        if b.as_ptr() as usize != at + covered || at + covered + b.len() > mapped.end {
            break;
        }
        covered += b.len();
    }
    // Made under the read lock, once per hot body: no mapping can be forgotten meanwhile
    // (neither this one nor the one whose pipe it may take, found by its start).
    let pipe = mapped.hot.pipe(&held::CLOCK, at, mapped.end - at, |a| {
        m.get(&a).map(|o| &o.hot)
    })?;
    Some((pipe, covered))
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
        let idle = IDLE.lock().ok().and_then(|mut v| v.pop());
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
    /// - from the start of a hot body held in a pipe of its own (`pages/held.rs`): the head
    ///   put in first (below), then the body's page references copied from that pipe
    ///   (tee(2));
    /// - otherwise a short `copied` (up to `arena::MAX_COPY` bytes: a head) is copied into
    ///   this thread's arena (`arena.rs`) and lent with the stored slices in one vmsplice(2);
    ///   a longer one is written into the pipe (writev(2)), then the slices vmspliced.
    ///
    /// Returns the bytes put in (of `copied`, then of `lent`, in order) and of those the ones
    /// lent.
    pub fn fill(
        &mut self,
        copied: &[IoSlice<'_>],
        lent: &[IoSlice<'_>],
    ) -> io::Result<(usize, usize)> {
        let write = self.fds.write.as_raw_fd();
        let want: usize = copied.iter().map(|b| b.len()).sum();
        let run = stored_run(lent).min(libc::UIO_MAXIOV as usize - 1);
        if run > 0
            && let Some((body, covered)) = held_for(&lent[..run])
            && covered > 0
        {
            let put = self.put_copied(copied, want)?;
            if put < want {
                return Ok((put, 0));
            }
            return match body.tee_into(write, covered) {
                Ok(n) => {
                    self.held += n;
                    Ok((put + n, n))
                }
                // What was copied in stands (an error is only one when nothing went in).
                Err(_) if put > 0 => Ok((put, 0)),
                Err(e) => Err(e),
            };
        }
        if want > 0
            && run > 0
            && let Some(done) = arena::with_copy(copied, |copy| {
                let mut iov: smallvec::SmallVec<[IoSlice<'_>; 20]> =
                    smallvec::SmallVec::with_capacity(run + 1);
                iov.push(copy);
                iov.extend_from_slice(&lent[..run]);
                // SAFETY: the copy lies in the arena, never written again and unmapped, not
                // reused; the stored slices lie in live stored mappings (checked above, kept
                // alive by the caller for the call): see the vmsplice below.
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
        // SAFETY: the slices are inside live stored mappings (checked just above, and kept
        // alive by the caller for the call), which are never written again and are unmapped,
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
        if let Ok(mut idle) = IDLE.lock()
            && idle.len() < IDLE_PIPES
        {
            idle.push(fds);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

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

    #[test]
    fn only_registered_memory_is_lent() {
        let heap = vec![3u8; 100_000];
        assert!(!is_stored(&heap));
        let (at, len) = (heap.as_ptr() as usize, heap.len());
        register(at, len);
        assert!(is_stored(&heap[10..90_000]));
        assert!(is_stored(&heap));
        forget(at);
        assert!(!is_stored(&heap));
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
        forget(body.as_ptr() as usize);
        assert_eq!(&out[..sent.len()], &sent[..]);
        assert!(out[head.len()..].iter().all(|&b| b == 9));
        pipe.drained(put);
        assert_eq!(pipe.held(), 0);
    }

    /// A body sent from its start a second time gets a pipe of its own, and the responses
    /// after it copy its page references from there (tee(2)) after the head: the same
    /// bytes, in order. A send from inside the body, or a body too large, never does; a
    /// forgotten body's pipe is closed.
    #[test]
    fn a_hot_body_is_teed_from_a_pipe_of_its_own() {
        let body: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
        let at = body.as_ptr() as usize;
        register(at, body.len());
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 70000\r\n\r\n".to_vec();
        let lent = [IoSlice::new(&body[..65_536]), IoSlice::new(&body[65_536..])];
        let mut want = head.clone();
        want.extend_from_slice(&body);
        for send in 0..3 {
            if send == 2 {
                assert!(held_for(&lent).is_some_and(|(_, covered)| covered == body.len()));
            }
            let mut pipe = Pipe::take().expect("a pipe");
            let (put, lent_n) = pipe.fill(&[IoSlice::new(&head)], &lent).expect("fill");
            assert_eq!((put, lent_n), (want.len(), body.len()), "send {send}");
            assert_eq!(read_all(&pipe, put), want, "send {send}");
            pipe.drained(put);
        }
        // From inside the body: vmspliced, and never counted towards a pipe.
        let inner = [IoSlice::new(&body[100..])];
        assert!(held_for(&inner).is_none());
        let mut pipe = Pipe::take().expect("a pipe");
        let (put, _) = pipe.fill(&[], &inner).expect("fill");
        assert_eq!(read_all(&pipe, put), &body[100..]);
        pipe.drained(put);
        forget(at);
        assert!(held_for(&lent).is_none());
        let big = vec![1u8; held::MAX_HELD + 1];
        register(big.as_ptr() as usize, big.len());
        for _ in 0..3 {
            assert!(held_for(&[IoSlice::new(&big)]).is_none());
        }
        forget(big.as_ptr() as usize);
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
        forget(body.as_ptr() as usize);
        assert_eq!(&out[..long.len()], &long[..]);
        assert_eq!(&out[long.len()..], &body[..]);
        pipe.drained(put);
    }
}
