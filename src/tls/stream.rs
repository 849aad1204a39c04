//! A TLS connection as a byte stream: rustls's connection state over any
//! `AsyncRead + AsyncWrite` transport (a client socket, a backend socket, a test pipe).
//!
//! Ours rather than tokio-rustls's because a connection must come apart and back together:
//! an idle client connection is *parked* (server/park.rs) as its raw socket plus its rustls
//! state, without a task or a reactor registration, and a new session resumes it from those
//! two parts later ([`TlsStream::from_parts`] / [`TlsStream::into_parts`]). It also answers
//! whether anything decrypted is still buffered ([`TlsStream::quiet`]), which decides whether
//! the connection may be parked at all.
//!
//! Reads hand out decrypted bytes straight from rustls's buffer; writes encrypt into rustls's
//! buffer (at most 64 KiB of records, its default limit) and push records to the transport
//! with vectored writes. A peer that closes the transport without `close_notify` is an end of
//! stream like any other: HTTP/1.1 frames its messages itself, so a truncated request is
//! still noticed.

use std::io::{self, BufRead, Read, Write};
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use rustls::{ConnectionCommon, SideData};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A TLS connection over `IO`; `C` is rustls's `ServerConnection` or `ClientConnection`.
#[derive(Debug)]
pub struct TlsStream<IO, C> {
    io: IO,
    conn: C,
    /// The transport reached its end.
    eof: bool,
    /// `close_notify` queued.
    closing: bool,
}

/// Why a handshake failed.
#[derive(Debug)]
pub enum HandshakeError {
    /// The peer closed the connection before the handshake was done.
    Eof,
    Io(io::Error),
    /// rustls refused the peer (the alert was sent when possible).
    Tls(rustls::Error),
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::Eof => f.write_str("connection closed during the handshake"),
            HandshakeError::Io(e) => write!(f, "{e}"),
            HandshakeError::Tls(e) => write!(f, "{e}"),
        }
    }
}

/// The transport as `std::io`, for rustls: `Pending` is `WouldBlock` (the waker is
/// registered by the poll underneath).
struct SyncIo<'a, 'b, T> {
    io: &'a mut T,
    cx: &'a mut Context<'b>,
}

impl<T: AsyncRead + Unpin> Read for SyncIo<'_, '_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(self.cx, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl<T: AsyncWrite + Unpin> Write for SyncIo<'_, '_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write_vectored(self.cx, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match Pin::new(&mut *self.io).poll_flush(self.cx) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl<IO, C, S> TlsStream<IO, C>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    C: DerefMut + Deref<Target = ConnectionCommon<S>>,
    S: SideData,
{
    /// A connection whose handshake has not started yet, or one taken apart with
    /// [`into_parts`](Self::into_parts) while [`quiet`](Self::quiet).
    pub fn from_parts(io: IO, conn: C) -> Self {
        TlsStream {
            io,
            conn,
            eof: false,
            closing: false,
        }
    }

    /// The transport and the TLS state, to be put together again with `from_parts`.
    pub fn into_parts(self) -> (IO, C) {
        (self.io, self.conn)
    }

    pub fn get_ref(&self) -> (&IO, &C) {
        (&self.io, &self.conn)
    }

    /// Whether nothing is buffered in either direction: no decrypted bytes unread, no
    /// records unwritten. Only then may the connection wait for its socket to be readable.
    pub fn quiet(&mut self) -> bool {
        if self.conn.wants_write() {
            return false;
        }
        self.conn
            .process_new_packets()
            .is_ok_and(|s| s.plaintext_bytes_to_read() == 0 && !s.peer_has_closed())
    }

    /// Writes queued records to the transport until none are left (`Ready(Ok)`), it would
    /// block (`Pending`) or fails.
    fn write_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            let mut io = SyncIo {
                io: &mut self.io,
                cx,
            };
            match self.conn.write_tls(&mut io) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Reads records from the transport and processes them: `Ready(Ok(false))` at the end of
    /// the transport.
    fn read_records(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, HandshakeError>> {
        let mut io = SyncIo {
            io: &mut self.io,
            cx,
        };
        match self.conn.read_tls(&mut io) {
            Ok(0) => {
                self.eof = true;
                return Poll::Ready(Ok(false));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            Err(e) => return Poll::Ready(Err(HandshakeError::Io(e))),
        }
        if let Err(e) = self.conn.process_new_packets() {
            // The alert describing the error, if the transport takes it now.
            let _ = self.write_pending(cx);
            return Poll::Ready(Err(HandshakeError::Tls(e)));
        }
        Poll::Ready(Ok(true))
    }

    /// Drives the handshake to its end (and writes what follows it, such as TLS 1.3 session
    /// tickets).
    pub fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), HandshakeError>> {
        loop {
            ready!(self.write_pending(cx)).map_err(HandshakeError::Io)?;
            if !self.conn.is_handshaking() {
                return Poll::Ready(Ok(()));
            }
            if !ready!(self.read_records(cx))? {
                return Poll::Ready(Err(HandshakeError::Eof));
            }
        }
    }

    /// The handshake, as a future.
    pub async fn handshake(&mut self) -> Result<(), HandshakeError> {
        std::future::poll_fn(|cx| self.poll_handshake(cx)).await
    }
}

impl<IO, C, S> AsyncRead for TlsStream<IO, C>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    C: DerefMut + Deref<Target = ConnectionCommon<S>> + Unpin,
    S: SideData,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.conn.reader().into_first_chunk() {
                Ok(data) => {
                    // Empty: the peer sent close_notify and everything before it was read.
                    let n = data.len().min(buf.remaining());
                    buf.put_slice(&data[..n]);
                    this.conn.reader().consume(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Closed without close_notify: an end of stream all the same.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Poll::Ready(Ok(()));
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            match ready!(this.read_records(cx)) {
                Ok(_) => {
                    // A record may ask for an answer (a KeyUpdate); errors show on the next
                    // write.
                    if this.conn.wants_write() {
                        let _ = this.write_pending(cx);
                    }
                }
                Err(HandshakeError::Io(e)) => return Poll::Ready(Err(e)),
                Err(e) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        e.to_string(),
                    )));
                }
            }
        }
    }
}

impl<IO, C, S> AsyncWrite for TlsStream<IO, C>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    C: DerefMut + Deref<Target = ConnectionCommon<S>> + Unpin,
    S: SideData,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    /// Encrypts as much as rustls's buffer takes (the slices go into as few records as
    /// their sizes allow), then writes records out. Bytes accepted are reported even when the
    /// transport is full; `Pending` only when nothing could be accepted.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        let mut refused = false;
        loop {
            let n = this.conn.writer().write_vectored(bufs)?;
            match this.write_pending(cx) {
                // rustls's buffer was full and is now written out: once more (a second refusal
                // with nothing buffered would never end).
                Poll::Ready(Ok(())) if n == 0 && !refused => refused = true,
                Poll::Ready(Ok(())) if n == 0 => {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(())) => return Poll::Ready(Ok(n)),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if n == 0 => return Poll::Pending,
                Poll::Pending => return Poll::Ready(Ok(n)),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.write_pending(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    /// Sends `close_notify`, then shuts the transport's write side.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closing {
            this.conn.send_close_notify();
            this.closing = true;
        }
        ready!(this.write_pending(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
