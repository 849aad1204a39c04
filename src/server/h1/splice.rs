//! The gate's side of copy-free sending of stored bodies (`cache/pages.rs`): on a cleartext
//! HTTP/1.1 connection, a write whose bytes include at least [`MIN_LENT`] of a stored body's
//! own mapping (one of 64 KiB to 512 KiB: `cache::pages::LENT_MAX`) goes out through a pipe
//! lent to the connection — the bytes before them (the response head, a `Date` line) copied
//! (into pages of the thread's arena, `cache/pages/arena.rs`), then put in by reference with
//! the stored bytes in one vmsplice(2), then the pipe spliced to the socket (splice(2)): two
//! system calls per response. The writer (hyper, or the fast-answer queue) is told the bytes
//! the pipe took were written; what the socket did not take yet stays in the pipe, which stays
//! with the connection, and every later write, 1xx head, flush, release or shutdown sends it
//! first — so the bytes leave in the order they were written, and a write that returns means
//! they are on their way as with a plain write. A connection that ends with bytes in its pipe
//! closes the pipe with it.
//!
//! Why not sendfile(2) from a memfd-backed store (the other design measured): the memory tier
//! keeps bodies in mappings of their own already, and a file per body (or an arena with its
//! own allocator and hole punching) costs descriptors and a second storage path for the same
//! gain; vmsplice of those mappings measured the same CPU per request as sendfile of a memfd
//! (bench/RESULTS.md, "copy-free hits").
//!
//! Plain writes stay for everything else: TLS and HTTP/2, bodies below `MAPPED_MIN`, bodies
//! the proxy changes (decoded, filtered), and when no pipe is free (counter `splice_fallback`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncWrite, Interest};
use tokio::net::TcpStream;

use crate::cache::pages::{Pipe, span};
use crate::stats::Counters;

use super::transport::Quiet;

/// Stored bytes a write must hold to go through a pipe: below it the system calls of the
/// pipe (two instead of one) cost more than the copy they save.
pub(super) const MIN_LENT: usize = 16 * 1024;

/// Bytes before the stored ones copied into the pipe at most (a response head and its `Date`
/// line); more and they are written plainly first.
const MAX_COPIED: usize = 16 * 1024;

/// splice(2) of up to `len` bytes from the pipe `from` to `socket` (non-blocking:
/// `WouldBlock` when the socket's buffer is full).
fn splice_to(socket: &TcpStream, from: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    // SAFETY: both descriptors are open for the call (the pipe borrowed from its `Pipe`, the
    // socket from its stream); splice moves page references between them and touches no
    // memory of ours.
    let n = unsafe {
        libc::splice(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            socket.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A plain socket: the pipe's bytes spliced to it once it is writable.
pub(super) fn poll_splice(
    socket: &mut TcpStream,
    cx: &mut Context<'_>,
    from: BorrowedFd<'_>,
    len: usize,
) -> Poll<io::Result<usize>> {
    loop {
        ready!(socket.poll_write_ready(cx))?;
        match socket.try_io(Interest::WRITABLE, || splice_to(socket, from, len)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            done => return Poll::Ready(done),
        }
    }
}

/// writev(2) of `bufs` to `socket` without asking tokio first whether it is writable: a
/// socket that takes a fast answer at once (nearly always) costs no readiness check
/// (`Registration::poll_ready`, ~66 instructions a hit, callgrind). `None` when it would
/// block (or was interrupted): tokio's write then finds that out again and waits for
/// readiness, so only a blocked write pays a second system call.
pub(super) fn write_now(socket: &TcpStream, bufs: &[io::IoSlice<'_>]) -> Option<io::Result<usize>> {
    // As std's `write_vectored`: at most IOV_MAX slices in one call.
    let count = bufs.len().min(1024) as libc::c_int;
    // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix (std documents it and casts the
    // same way); the slices are live borrows for the call, which only reads them; the socket
    // is open while borrowed from its stream.
    let n = unsafe {
        libc::writev(
            socket.as_raw_fd(),
            bufs.as_ptr().cast::<libc::iovec>(),
            count,
        )
    };
    if n >= 0 {
        return Some(Ok(n as usize));
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => None,
        _ => Some(Err(e)),
    }
}

/// What [`Splice::lend`] did with a write.
enum Lend {
    /// This many bytes went into the pipe.
    Put(usize),
    /// The first this many slices are to be written plainly.
    Plain(usize),
}

/// A connection's pipe while it holds bytes.
#[derive(Default)]
pub(super) struct Splice {
    pipe: Option<Pipe>,
}

impl Splice {
    /// Whether bytes written are still in the pipe.
    #[inline]
    pub fn holds(&self) -> bool {
        self.pipe.is_some()
    }

    /// Sends what the pipe holds; ready once it is empty (the pipe then goes back to the
    /// pool).
    pub fn poll_drain<T: Quiet>(
        &mut self,
        io: &mut T,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while let Some(pipe) = self.pipe.as_mut() {
            if pipe.held() == 0 {
                self.pipe = None;
                break;
            }
            let n = ready!(io.poll_splice(cx, pipe.reader(), pipe.held()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            pipe.drained(n);
        }
        Poll::Ready(Ok(()))
    }

    /// One write of `bufs` to `io`, after what the pipe still holds: through the pipe when they
    /// hold enough of a stored body (see the module docs), else a plain vectored write.
    pub fn poll_write<T: AsyncWrite + Unpin + Quiet>(
        &mut self,
        io: &mut T,
        cx: &mut Context<'_>,
        counters: &Counters,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(io, cx))?;
        let plain = if T::sends_files() {
            match self.lend(counters, bufs) {
                Lend::Put(put) => {
                    // Off to the socket now what it takes; the rest goes on the next write or
                    // flush (which wait for it). A failure here is the connection's: reported.
                    if let Poll::Ready(Err(e)) = self.poll_drain(io, cx) {
                        return Poll::Ready(Err(e));
                    }
                    return Poll::Ready(Ok(put));
                }
                Lend::Plain(k) => k,
            }
        } else {
            bufs.len()
        };
        if let Some(done) = io.write_now(&bufs[..plain]) {
            return Poll::Ready(done);
        }
        Pin::new(io).poll_write_vectored(cx, &bufs[..plain])
    }

    /// Puts the start of `bufs` into a pipe when it holds at least [`MIN_LENT`] stored bytes
    /// after at most [`MAX_COPIED`] others.
    fn lend(&mut self, counters: &Counters, bufs: &[io::IoSlice<'_>]) -> Lend {
        if bufs.iter().map(|b| b.len()).sum::<usize>() < MIN_LENT {
            return Lend::Plain(bufs.len());
        }
        // One look at the stored mappings for the whole write (`pages::span`).
        let span = span(bufs);
        let first = span.copied().len();
        let copied: usize = span.copied().iter().map(|b| b.len()).sum();
        // Nothing stored (all plain), or too much to copy into the pipe before it: written
        // plainly first, up to the stored bytes.
        if span.stored().is_empty() || copied > MAX_COPIED {
            return Lend::Plain(first);
        }
        let stored: usize = span.stored().iter().map(|b| b.len()).sum();
        if stored < MIN_LENT {
            return Lend::Plain(bufs.len());
        }
        let Some(mut pipe) = Pipe::take() else {
            counters.splice_fallback.inc();
            return Lend::Plain(bufs.len());
        };
        match pipe.fill_span(&span) {
            Ok((put, lent)) if put > 0 => {
                counters.splice_bytes.add(lent as u64);
                self.pipe = Some(pipe);
                Lend::Put(put)
            }
            // Nothing went in (the kernel refused): a plain write, and the empty pipe back.
            _ => {
                counters.splice_fallback.inc();
                Lend::Plain(bufs.len())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::io::IoSlice;

    /// Written straight away while the socket takes bytes (all of them, in order); once its
    /// buffers are full, `None` (not an error): the caller waits for readiness through tokio.
    #[tokio::test]
    async fn a_write_now_is_whole_or_waits() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let (a, b) = (b"head\r\n".as_slice(), b"body".as_slice());
        let n = write_now(&client, &[IoSlice::new(a), IoSlice::new(b)]).expect("writable");
        assert_eq!(n.unwrap(), a.len() + b.len());
        let mut got = [0u8; 10];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"head\r\nbody");
        // Nobody reads: the socket's buffers fill, and the write says it would block.
        let big = vec![7u8; 1 << 20];
        let mut blocked = false;
        for _ in 0..1000 {
            match write_now(&client, &[IoSlice::new(&big)]) {
                Some(Ok(n)) => assert!(n > 0),
                Some(Err(e)) => panic!("{e}"),
                None => {
                    blocked = true;
                    break;
                }
            }
        }
        assert!(blocked, "a full socket never said it would block");
    }

    fn stored(len: usize) -> Bytes {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        crate::cache::body::one(&[Bytes::from(data)], len)
    }

    /// A head and a stored body go into the pipe (the head copied, the body lent); small
    /// writes, heap bodies and a long heap prefix are written plainly.
    #[test]
    fn what_goes_through_the_pipe() {
        let counters = Counters::default();
        let body = stored(68_000);
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 68000\r\n\r\n";
        let heap = vec![1u8; 68_000];
        let mut splice = Splice::default();
        // Too small, or nothing stored: plain.
        let small = [IoSlice::new(head), IoSlice::new(&body[..100])];
        assert!(matches!(splice.lend(&counters, &small), Lend::Plain(2)));
        let unstored = [IoSlice::new(head), IoSlice::new(&heap)];
        assert!(matches!(splice.lend(&counters, &unstored), Lend::Plain(2)));
        // A long heap prefix goes first, plainly, up to the stored bytes.
        let long = [IoSlice::new(&heap), IoSlice::new(head), IoSlice::new(&body)];
        assert!(matches!(splice.lend(&counters, &long), Lend::Plain(2)));
        assert!(!splice.holds());
        // Head and body: into the pipe.
        let whole = [
            IoSlice::new(head),
            IoSlice::new(&body[..65_536]),
            IoSlice::new(&body[65_536..]),
        ];
        let Lend::Put(put) = splice.lend(&counters, &whole) else {
            panic!("not lent");
        };
        assert_eq!(put, head.len() + 68_000);
        assert!(splice.holds());
        assert_eq!(counters.splice_bytes.get(), 68_000);
        assert_eq!(counters.splice_fallback.get(), 0);
    }
}
