//! What h2 reads and writes through the frame watcher (`AsyncRead`, `AsyncWrite`): every
//! byte through the frame-header scanner of its side, a read that broke a limit dropped,
//! and Shellac's `GOAWAY` written at a frame boundary when the watcher ends the connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::scan::Event;
use super::{Kill, Watched};

impl<I: AsyncRead + AsyncWrite + Unpin> Watched<I> {
    /// Writes Shellac's GOAWAY, flushes and shuts the write side; Ready once done (errors
    /// end it too: the connection is going away either way).
    fn drive_kill(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let Some(kill) = self.kill.as_mut() else {
                return Poll::Ready(());
            };
            match kill {
                Kill::Writing { frame, at } => {
                    match Pin::new(&mut self.io).poll_write(cx, &frame[*at..]) {
                        Poll::Ready(Ok(n)) if n > 0 => {
                            *at += n;
                            if *at == frame.len() {
                                *kill = Kill::Flushing;
                            }
                        }
                        Poll::Ready(_) => *kill = Kill::Done,
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Kill::Flushing => {
                    let _ = ready!(Pin::new(&mut self.io).poll_flush(cx));
                    *kill = Kill::ShuttingDown;
                }
                Kill::ShuttingDown => {
                    let _ = ready!(Pin::new(&mut self.io).poll_shutdown(cx));
                    *kill = Kill::Done;
                }
                Kill::Done => return Poll::Ready(()),
            }
        }
    }
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "HTTP/2 connection ended by Shellac",
    )
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.kill.is_some() {
            if !this.wr.at_boundary() {
                // h2 finishes the frame it is writing first (it is polled for that).
                return Poll::Pending;
            }
            ready!(this.drive_kill(cx));
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
        let mut fresh = &buf.filled()[before..];
        if this.preface_left > 0 {
            let skip = fresh.len().min(usize::from(this.preface_left));
            this.preface_left -= skip as u8;
            fresh = &fresh[skip..];
        }
        let mut ok = true;
        // Taken out while it runs: the frame handlers borrow the rest of `this`.
        let mut scan = std::mem::take(&mut this.rd);
        scan.feed(fresh, |e| {
            ok = match e {
                Event::Head(f) => this.on_read(f),
                Event::Settings(bytes) => this.on_settings(bytes),
                Event::Coded(_) => true,
            };
            ok
        });
        this.rd = scan;
        if !ok {
            // h2 never sees the read that broke a limit.
            buf.set_filled(before);
            if !this.wr.at_boundary() {
                return Poll::Pending;
            }
            ready!(this.drive_kill(cx));
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let mut buf = buf;
        if this.kill.is_some() {
            if this.wr.at_boundary() {
                ready!(this.drive_kill(cx));
                return Poll::Ready(Err(gone()));
            }
            // Only the rest of the frame in progress, so the GOAWAY goes right after it.
            buf = &buf[..buf.len().min(this.wr.left_in_frame().max(1))];
        }
        let n = ready!(Pin::new(&mut this.io).poll_write(cx, buf))?;
        let mut scan = std::mem::take(&mut this.wr);
        scan.feed(&buf[..n], |e| {
            if let Event::Coded(f) = e {
                this.on_write(f);
            }
            true
        });
        this.wr = scan;
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let slices = bufs.iter().filter(|b| !b.is_empty()).count();
        if this.kill.is_some() || !this.io.is_write_vectored() || slices < 2 {
            // One slice at a time through poll_write (which cuts the write at the frame in
            // progress when the connection is being ended; a single slice is a plain `send`,
            // cheaper in the kernel than `writev`).
            let first = bufs
                .iter()
                .find(|b| !b.is_empty())
                .map_or(&[][..], |b| &b[..]);
            return self.poll_write(cx, first);
        }
        // h2 writes a frame's head and its payload (a response body's chunk, not copied into
        // its buffer) as two slices: one system call for both. The scanner then sees the bytes
        // written, slice by slice, in order.
        let n = ready!(Pin::new(&mut this.io).poll_write_vectored(cx, bufs))?;
        let mut scan = std::mem::take(&mut this.wr);
        let mut left = n;
        for b in bufs {
            if left == 0 {
                break;
            }
            let take = left.min(b.len());
            scan.feed(&b[..take], |e| {
                if let Event::Coded(f) = e {
                    this.on_write(f);
                }
                true
            });
            left -= take;
        }
        this.wr = scan;
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.kill.is_some() && this.wr.at_boundary() {
            ready!(this.drive_kill(cx));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.kill.is_some() {
            if this.wr.at_boundary() {
                ready!(this.drive_kill(cx));
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
