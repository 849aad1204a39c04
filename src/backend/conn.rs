//! One backend connection: hyper's request sender, and the socket wrapper under it that holds
//! every response head to `server.max_response_header_size` and each of its field lines to
//! `server.max_response_field_size` exactly.
//!
//! hyper's own bound is the size of its read buffer, which it fills in whatever pieces the
//! socket gives: a head was accepted up to ~1.5× the setting when it came in one write, and
//! at random when it came in 64 KB pieces (issue 23, defect 7). The wrapper counts the bytes of
//! each head as they are read, from the moment a request is sent until the blank line that ends
//! the response head (interim 1xx heads are counted one by one), and fails the read the moment
//! a head passes the limit. Body bytes are never counted or scanned.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use hyper::client::conn::http1::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::request_body::RequestBody;
use crate::txlog::vsl::Current;

/// A pooled backend connection.
pub(crate) struct Http1Conn {
    pub(crate) sender: SendRequest<RequestBody>,
    /// Armed before each request: the next bytes read are a response head.
    watch: Arc<AtomicBool>,
    /// Set when its last response said `close` after it was read (VCL's
    /// `beresp.http.connection`): the pool never hands it out again.
    retired: Arc<AtomicBool>,
    /// The process's number for it (in the `BackendClose` record, where Varnish gives the
    /// file descriptor).
    id: u64,
    /// The Varnish-style records of the backend request it serves (`log.vsl_records`), which
    /// get its `BackendClose` when it goes back to the pool or is closed.
    vsl: Option<Current>,
}

/// The next connection's number.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Http1Conn {
    pub(super) fn new(sender: SendRequest<RequestBody>, watch: Arc<AtomicBool>) -> Http1Conn {
        Http1Conn {
            sender,
            watch,
            retired: Arc::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            vsl: None,
        }
    }

    /// The backend request about to be sent on it, whose records get its `BackendClose`.
    pub(super) fn serving(&mut self, vsl: Option<Current>) {
        self.vsl = vsl;
    }

    /// Logs `BackendClose NUMBER BACKEND recycle|close` on the request it served (as Varnish
    /// does when a fetch lets go of its connection).
    pub(super) fn log_close(&mut self, backend: &str, recycled: bool) {
        if let Some(v) = self.vsl.take() {
            let how = if recycled { "recycle" } else { "close" };
            v.0.log_at_end("BackendClose", format!("{} {backend} {how}", self.id));
        }
    }

    /// Logs `FetchError` records (Varnish's words for a body that failed as it was read,
    /// `body_words.rs`) on the backend request it serves, before its `BackendClose`.
    pub(super) fn log_fetch_error(&self, words: &[String]) {
        if let Some(v) = &self.vsl {
            for w in words {
                v.0.log("FetchError", w.clone());
            }
        }
    }

    /// The switch that keeps the connection out of the pool from now on.
    pub(super) fn retired_flag(&self) -> Arc<AtomicBool> {
        self.retired.clone()
    }

    /// Whether the connection serves no other request.
    pub(super) fn retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// The next bytes the backend sends start a response head.
    pub(super) fn expect_head(&self) {
        self.watch.store(true, Ordering::Release);
    }
}

/// The error a head (or one of its field lines) over the limit fails the connection with;
/// recognised by [`head_too_large`] to answer 502 `backend-invalid-response` (never retried:
/// the backend did answer). The text names the setting.
#[derive(Debug, thiserror::Error)]
#[error("{0} ({1} bytes)")]
pub(crate) struct HeadTooLarge(pub &'static str, pub usize);

const HEAD_TOO_LARGE: &str = "response head larger than max_response_header_size";
const FIELD_TOO_LARGE: &str = "response field line longer than max_response_field_size";

/// Which limit hyper's error was caused by, if a head or field line over the limit caused it.
pub(crate) fn head_too_large(e: &hyper::Error) -> Option<&'static str> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>()
            && let Some(h) = io.get_ref().and_then(|i| i.downcast_ref::<HeadTooLarge>())
        {
            return Some(h.0);
        }
        if let Some(h) = s.downcast_ref::<HeadTooLarge>() {
            return Some(h.0);
        }
        source = s.source();
    }
    None
}

fn field_too_large(limit: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        HeadTooLarge(FIELD_TOO_LARGE, limit),
    )
}

/// Where the scanner is within a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Line {
    /// Inside a line.
    Text,
    /// Just after a line feed: an empty line here ends the head.
    Start,
    /// After a line feed and a carriage return.
    StartCr,
}

/// The socket under hyper, counting response heads.
pub(super) struct HeadLimited<T> {
    inner: T,
    counter: HeadCounter,
}

impl<T> HeadLimited<T> {
    pub(super) fn new(
        inner: T,
        limit: usize,
        field_limit: usize,
        watch: Arc<AtomicBool>,
    ) -> HeadLimited<T> {
        HeadLimited {
            inner,
            counter: HeadCounter::new(limit, field_limit, watch),
        }
    }
}

/// Counts the bytes of response heads as they are read.
struct HeadCounter {
    watch: Arc<AtomicBool>,
    limit: usize,
    /// Longest field line (without its CR LF).
    field_limit: usize,
    /// Bytes of the current head so far.
    count: usize,
    /// Bytes of the current line so far (its line feed not counted), and whether it is the
    /// status line (not a field line).
    line_len: usize,
    status_line: bool,
    /// The last byte was a CR.
    prev_cr: bool,
    line: Line,
    /// The status code's digits, as they arrive (offsets 9-11 of `HTTP/1.1 200`).
    status: [u8; 3],
}

impl HeadCounter {
    fn new(limit: usize, field_limit: usize, watch: Arc<AtomicBool>) -> HeadCounter {
        HeadCounter {
            watch,
            limit,
            field_limit,
            count: 0,
            line_len: 0,
            status_line: true,
            prev_cr: false,
            line: Line::Text,
            status: [0; 3],
        }
    }

    /// Scans `bytes` (just read) while a head is expected. Returns an error once the head in
    /// progress is longer than the limit.
    fn scan(&mut self, bytes: &[u8]) -> io::Result<()> {
        if !self.watch.load(Ordering::Acquire) {
            return Ok(());
        }
        for &b in bytes {
            if let Some(d) = self
                .count
                .checked_sub(9)
                .and_then(|k| self.status.get_mut(k))
            {
                *d = b;
            }
            self.count += 1;
            if b == b'\n' {
                // The line's own bytes: its CR (if any) is part of its end, not of the field.
                let len = self.line_len - usize::from(self.prev_cr);
                if !self.status_line && len > self.field_limit {
                    return Err(field_too_large(self.field_limit));
                }
                self.line_len = 0;
                self.status_line = false;
            } else {
                self.line_len += 1;
                // Past the limit even if the next byte is its CR: refused without waiting.
                if !self.status_line && self.line_len > self.field_limit + 1 {
                    return Err(field_too_large(self.field_limit));
                }
            }
            self.prev_cr = b == b'\r';
            let end = match (self.line, b) {
                (Line::Start | Line::StartCr, b'\n') => true,
                (_, b'\n') => {
                    self.line = Line::Start;
                    false
                }
                (Line::Start, b'\r') => {
                    self.line = Line::StartCr;
                    false
                }
                _ => {
                    self.line = Line::Text;
                    false
                }
            };
            if self.count > self.limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    HeadTooLarge(HEAD_TOO_LARGE, self.limit),
                ));
            }
            if end {
                // An interim response (1xx other than 101) is followed by another head.
                let interim = self.status[0] == b'1' && self.status != *b"101";
                self.count = 0;
                self.line = Line::Text;
                self.status = [0; 3];
                self.status_line = true;
                if !interim {
                    // What follows is body (or a tunnel): not scanned.
                    self.watch.store(false, Ordering::Release);
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for HeadLimited<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if this.counter.watch.load(Ordering::Acquire) {
            this.counter.scan(&buf.filled()[before..])?;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeadLimited<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(limit: usize) -> HeadCounter {
        HeadCounter::new(limit, limit, Arc::new(AtomicBool::new(true)))
    }

    /// `server.max_response_field_size` (Varnish's `http_resp_hdr_len`): a field line at the
    /// limit passes and one byte more fails, however the head is split; the status line and
    /// the CR LF are not counted; an interim head's status line is not a field line either.
    #[test]
    fn a_field_line_at_the_limit_passes_one_byte_more_fails() {
        let field = "1...5: ..0....5....0....5....0....5....0";
        assert_eq!(field.len(), 40);
        let ok = format!("HTTP/1.1 200 OK with a status line longer than forty\r\n{field}\r\n\r\n");
        let over = format!("HTTP/1.1 200 OK\r\n{field}.\r\n\r\n");
        for piece in [1, 3, 41, 1000] {
            let mut l = HeadCounter::new(1000, 40, Arc::new(AtomicBool::new(true)));
            let r: io::Result<()> = ok.as_bytes().chunks(piece).try_for_each(|c| l.scan(c));
            assert!(r.is_ok(), "piece {piece}");
            let mut l = HeadCounter::new(1000, 40, Arc::new(AtomicBool::new(true)));
            let e = over
                .as_bytes()
                .chunks(piece)
                .try_for_each(|c| l.scan(c))
                .unwrap_err();
            assert!(e.to_string().contains("max_response_field_size"), "{e}");
        }
        let mut l = HeadCounter::new(1000, 20, Arc::new(AtomicBool::new(true)));
        l.scan(b"HTTP/1.1 103 Early Hints and more words\r\n\r\n")
            .unwrap();
        l.scan(b"HTTP/1.1 200 OK but a long reason phrase\r\nx: y\r\n\r\n")
            .unwrap();
    }

    #[test]
    fn a_head_at_the_limit_passes_one_byte_more_fails() {
        let head = b"HTTP/1.1 200 OK\r\nx: y\r\n\r\n";
        let mut at = limited(head.len());
        at.scan(head).unwrap();
        assert!(
            !at.watch.load(Ordering::Relaxed),
            "head ended: body bytes are not counted"
        );
        at.scan(&[b'z'; 100]).unwrap();
        let mut over = limited(head.len() - 1);
        let e = over.scan(head).unwrap_err();
        assert!(e.get_ref().is_some_and(|i| i.is::<HeadTooLarge>()));
    }

    #[test]
    fn pieces_of_any_size_give_the_same_answer() {
        let head = format!("HTTP/1.1 200 OK\r\nx: {}\r\n\r\nbody", "a".repeat(5000));
        let len = head.len() - 4;
        for piece in [1, 2, 3, 7, 64, 4096, 100_000] {
            for (limit, ok) in [(len, true), (len - 1, false)] {
                let mut l = limited(limit);
                let r: io::Result<()> = head.as_bytes().chunks(piece).try_for_each(|c| l.scan(c));
                assert_eq!(r.is_ok(), ok, "piece {piece}, limit {limit}");
            }
        }
    }

    #[test]
    fn bare_line_feeds_end_a_head_as_httparse_reads_it() {
        let mut l = limited(1000);
        l.scan(b"HTTP/1.1 200 OK\nx: y\n\n").unwrap();
        assert!(!l.watch.load(Ordering::Relaxed));
    }

    #[test]
    fn interim_heads_are_counted_one_by_one_and_101_ends_the_watch() {
        let mut l = limited(30);
        l.scan(b"HTTP/1.1 103 Early Hints\r\n\r\n").unwrap();
        assert!(l.watch.load(Ordering::Relaxed), "a final head follows");
        l.scan(b"HTTP/1.1 200 OK\r\nx: yy\r\n\r\n").unwrap();
        assert!(!l.watch.load(Ordering::Relaxed));
        let mut up = limited(1000);
        up.scan(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")
            .unwrap();
        assert!(
            !up.watch.load(Ordering::Relaxed),
            "tunnel bytes are not heads"
        );
    }

    #[test]
    fn a_new_request_rearms_the_count() {
        let watch = Arc::new(AtomicBool::new(true));
        let mut l = HeadCounter::new(40, 40, watch.clone());
        l.scan(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
        l.scan(&[b'x'; 1000]).unwrap();
        watch.store(true, Ordering::Relaxed);
        assert!(l.scan(&[b'x'; 41]).is_err());
    }
}
