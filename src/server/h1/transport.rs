//! What the gate needs of the socket it wraps besides reading and writing: whether it is
//! quiet (nothing buffered inside it: parking), and whether it sends file regions and pipes
//! itself (sendfile(2), splice(2): a plain TCP socket).

use std::io;
use std::task::{Context, Poll};

/// A transport the gate can hand back for parking: `quiet` says nothing is buffered inside
/// it (no decrypted bytes unread, nothing unwritten), so the socket's readiness tells all.
pub(crate) trait Quiet {
    fn quiet(&mut self) -> bool;

    /// Whether the transport sends files itself ([`Quiet::poll_send_file`]): a plain socket.
    fn sends_files() -> bool
    where
        Self: Sized,
    {
        false
    }

    /// Sends `len` bytes at `offset` of `region`'s file (sendfile(2)); how many went.
    fn poll_send_file(
        &mut self,
        _cx: &mut Context<'_>,
        _region: &crate::backend::Region,
        _offset: u64,
        _len: usize,
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(io::ErrorKind::Unsupported.into()))
    }

    /// One vectored write of `bufs` straight to the socket, before any readiness is asked
    /// for (`splice.rs`, `write_now`); `None` when it would block, or for a transport that
    /// does not write that way: the caller then writes through `AsyncWrite`.
    fn write_now(&mut self, _bufs: &[io::IoSlice<'_>]) -> Option<io::Result<usize>> {
        None
    }

    /// Sends up to `len` bytes from the pipe `from` (splice(2), `splice.rs`); how many went.
    /// Only asked of a transport that [`Quiet::sends_files`].
    fn poll_splice(
        &mut self,
        _cx: &mut Context<'_>,
        _from: std::os::fd::BorrowedFd<'_>,
        _len: usize,
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(io::ErrorKind::Unsupported.into()))
    }
}
