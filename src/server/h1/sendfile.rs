//! The gate's side of zero-copy file sending (`backend/files/zero_copy.rs`): in hyper's
//! writes, a placeholder slice stands for a region of a file, which goes out with
//! sendfile(2) straight from the page cache to the socket; the bytes before it (the head, a
//! multipart boundary) with a plain write first. hyper is told the placeholder's bytes were
//! written, so its count of the body and the socket's agree. A region out of step, a file that
//! changed before its last bytes, or one that ends early (sendfile sends nothing: it shrank)
//! fails the write, and hyper closes the connection — the client never gets a body of the
//! wrong length.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncWrite, Interest};
use tokio::net::TcpStream;

use crate::backend::{Region, Regions, placeholder_offset};

use super::conn::note_write;
use super::{Gate, Quiet};

/// sendfile(2) of `len` bytes at `offset` of `file` to `socket` (non-blocking: `WouldBlock`
/// when the socket's buffer is full).
fn send_file(
    socket: &TcpStream,
    file: BorrowedFd<'_>,
    offset: u64,
    len: usize,
) -> io::Result<usize> {
    let mut off = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: both descriptors are open for the call (the socket borrowed from its stream,
    // the file from its `Arc<Opened>`), and `off` is a valid, exclusively borrowed off_t the
    // kernel updates; sendfile reads the file and writes the socket, touching no memory of ours.
    let n = unsafe { libc::sendfile(socket.as_raw_fd(), file.as_raw_fd(), &mut off, len) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A plain socket sends files itself.
fn poll_send_file(
    socket: &mut TcpStream,
    cx: &mut Context<'_>,
    region: &Region,
    offset: u64,
    len: usize,
) -> Poll<io::Result<usize>> {
    loop {
        ready!(socket.poll_write_ready(cx))?;
        match socket.try_io(Interest::WRITABLE, || {
            send_file(socket, region.fd(), offset, len)
        }) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            done => return Poll::Ready(done),
        }
    }
}

/// A plain socket sends files itself.
impl Quiet for TcpStream {
    fn quiet(&mut self) -> bool {
        true
    }

    fn sends_files() -> bool {
        true
    }

    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        region: &Region,
        offset: u64,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        poll_send_file(self, cx, region, offset, len)
    }

    fn poll_splice(
        &mut self,
        cx: &mut Context<'_>,
        from: BorrowedFd<'_>,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        super::splice::poll_splice(self, cx, from, len)
    }

    fn write_now(&mut self, bufs: &[io::IoSlice<'_>]) -> Option<io::Result<usize>> {
        super::splice::write_now(self, bufs)
    }
}

fn refused(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

impl<T: AsyncWrite + Unpin + Quiet> Gate<T> {
    /// The connection's regions, for the session to switch file bodies to (`None` when the
    /// transport cannot send files: TLS).
    pub fn file_regions(&mut self) -> Option<Arc<Regions>> {
        if !T::sends_files() {
            return None;
        }
        Some(self.regions.get_or_insert_with(Regions::new).clone())
    }

    /// hyper's write while placeholders are queued: the plain bytes before the first
    /// placeholder, or the first placeholder's region by sendfile(2).
    pub(super) fn poll_write_regions(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let first = bufs
            .iter()
            .position(|b| placeholder_offset(b).is_some())
            .unwrap_or(bufs.len());
        if first > 0 {
            let polled = self.io()?.poll_write_vectored(cx, &bufs[..first]);
            note_write(&self.state, polled.is_pending(), &mut self.clock);
            return polled;
        }
        let slice: &[u8] = &bufs[0];
        let (Some(regions), Some(at)) = (self.regions.clone(), placeholder_offset(slice)) else {
            return Poll::Ready(Err(refused("a placeholder without a region")));
        };
        let len = slice.len();
        let counters = self.counters.clone();
        let Some(io) = self.inner.as_mut() else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        let polled = regions.with_front(|front| {
            let Some(region) = front else {
                return (
                    Poll::Ready(Err(refused("a placeholder without a region"))),
                    false,
                );
            };
            if at as u64 + len as u64 != region.len {
                return (
                    Poll::Ready(Err(refused("a placeholder out of step"))),
                    false,
                );
            }
            if region.last && !region.unchanged() {
                return (
                    Poll::Ready(Err(refused("file changed while it was sent"))),
                    false,
                );
            }
            match T::poll_send_file(
                Pin::new(io).get_mut(),
                cx,
                region,
                region.offset + at as u64,
                len,
            ) {
                Poll::Ready(Ok(0)) => (
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while it was sent",
                    ))),
                    false,
                ),
                Poll::Ready(Ok(n)) => {
                    counters.sendfile_bytes.add(n as u64);
                    (Poll::Ready(Ok(n)), at + n == region.len as usize)
                }
                other => (other, false),
            }
        });
        note_write(&self.state, polled.is_pending(), &mut self.clock);
        polled
    }
}
