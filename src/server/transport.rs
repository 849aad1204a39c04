//! The socket under a client session, and what it can do beyond reading and writing.
//!
//! Today a session runs on plain TCP; a transport that cannot send from a file (a test's
//! in-memory pipe, later TLS) keeps the default and the gate writes the bytes itself.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::TcpStream;

/// A client connection's byte stream.
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin {
    /// Whether [`Transport::poll_send_file`] can send (false: it always answers `None`).
    fn sends_files(&self) -> bool {
        false
    }

    /// Sends up to `len` bytes of `file` from `offset` straight from the file's pages
    /// (`sendfile(2)`: no copy into the socket). `None`: this transport cannot; write the
    /// bytes instead. `file` must stay open and unchanged until the call returns, and the
    /// pages must not be rewritten afterwards (the kernel may still be sending them).
    fn poll_send_file(
        &mut self,
        _cx: &mut Context<'_>,
        _file: RawFd,
        _offset: u64,
        _len: usize,
    ) -> Option<Poll<io::Result<usize>>> {
        None
    }
}

impl Transport for TcpStream {
    fn sends_files(&self) -> bool {
        true
    }

    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: RawFd,
        offset: u64,
        len: usize,
    ) -> Option<Poll<io::Result<usize>>> {
        let socket = self.as_raw_fd();
        let Ok(mut off) = libc::off_t::try_from(offset) else {
            return None;
        };
        Some(loop {
            match self.poll_write_ready(cx) {
                Poll::Pending => break Poll::Pending,
                Poll::Ready(Err(e)) => break Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let sent = self.try_io(Interest::WRITABLE, || {
                // SAFETY: both descriptors are open (the socket is `self`, the file is kept open
                // by the caller); `off` is a local the kernel reads and advances.
                let n = unsafe { libc::sendfile(socket, file, &mut off, len) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match sent {
                Ok(n) => break Poll::Ready(Ok(n)),
                // Readiness was stale: cleared by try_io, wait for the next.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => break Poll::Ready(Err(e)),
            }
        })
    }
}

impl Transport for tokio::io::DuplexStream {}
