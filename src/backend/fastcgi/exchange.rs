//! One FastCGI request on one connection: BEGIN_REQUEST, the parameters, the body as STDIN
//! (streamed), then the application's STDOUT read up to the end of the CGI head; the rest of
//! STDOUT is the response body ([`StdoutBody`]), and the connection goes back to the pool
//! once END_REQUEST came (FCGI_KEEP_CONN). STDERR goes to Shellac's log, bounded per request.
//! Multiplexing is off: one request per connection at a time, always id 1.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};

use super::pool::Pool;
use crate::backend::connector::Transport;
use crate::backend::error::BoxError;
use crate::backend::request_body::RequestBody;
use crate::fastcgi::head::{self, CgiHead};
use crate::fastcgi::record::{self, ProtocolStatus, Reader, Record};

/// The request id: one request per connection at a time.
pub(super) const ID: u16 = 1;
/// Error output logged per request, at most (beyond it, one line says more was not logged).
const STDERR_LOGGED: usize = 4096;
/// Bytes asked for per read: a `phpinfo()` page (~69 KB) in ~7 reads rather than ~9 at
/// 16 KiB, and under glibc's mmap threshold (64 KiB, `server::trim`) so that the buffer is
/// never a mapping of its own (bench/RESULTS.md, "phpinfo per CPU-second").
const READ: usize = 32 * 1024;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum ExchangeError {
    /// The connection failed (a kept one the application closed, a reset): `io::Error`
    /// underneath, so a request on a reused connection is tried again on a new one.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The application's bytes or head are not acceptable: 502.
    #[error("{0}")]
    Invalid(String),
}

/// Sends the request: BEGIN_REQUEST, PARAMS, STDIN (the body streamed in records).
pub(super) async fn send(
    conn: &mut Transport,
    params: &[u8],
    mut body: RequestBody,
    keep: bool,
) -> Result<(), ExchangeError> {
    let mut out = BytesMut::with_capacity(params.len() + 64);
    record::begin_request(&mut out, ID, keep);
    record::stream(&mut out, record::Kind::Params, ID, params);
    record::end_stream(&mut out, record::Kind::Params, ID);
    if body.is_end_stream() {
        // No body (GET, HEAD): the whole request in one write, one segment.
        record::end_stream(&mut out, record::Kind::Stdin, ID);
        conn.write_all(&out).await?;
        conn.flush().await?;
        return Ok(());
    }
    conn.write_all(&out).await?;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| std::io::Error::other(e.to_string()))?;
        if let Ok(data) = frame.into_data()
            && !data.is_empty()
        {
            out.clear();
            record::stream(&mut out, record::Kind::Stdin, ID, &data);
            conn.write_all(&out).await?;
        }
    }
    out.clear();
    record::end_stream(&mut out, record::Kind::Stdin, ID);
    conn.write_all(&out).await?;
    conn.flush().await?;
    Ok(())
}

/// Reads records until the CGI head is complete: the head, and the body bytes already read
/// after it; or the END_REQUEST that came first (an answer without a head is refused).
pub(super) async fn read_head(
    conn: &mut Transport,
    state: &mut ReadState,
    max_head: usize,
    max_fields: usize,
) -> Result<(CgiHead, Bytes), ExchangeError> {
    let mut stdout = BytesMut::new();
    loop {
        match state.next(conn).await? {
            Record::Stdout(b) if b.is_empty() => {}
            Record::Stdout(b) => {
                stdout.extend_from_slice(&b);
                match head::parse(&stdout, max_head, max_fields) {
                    Ok(Some((head, used))) => {
                        let rest = stdout.split_off(used).freeze();
                        return Ok((head, rest));
                    }
                    Ok(None) => {}
                    Err(e) => return Err(ExchangeError::Invalid(e.to_string())),
                }
            }
            Record::Stderr(b) => state.log(&b),
            Record::End(end) => {
                return Err(ExchangeError::Invalid(match end.protocol_status {
                    ProtocolStatus::RequestComplete => {
                        "the application ended the request without a response head".to_string()
                    }
                    s => format!("the application refused the request: {s:?}"),
                }));
            }
            Record::Ignored => {}
        }
    }
}

/// The reading side of one exchange: the buffer, the record reader, the error log's bound.
pub(super) struct ReadState {
    buf: BytesMut,
    reader: Reader,
    logged: usize,
    backend: Arc<str>,
    /// Whether this exchange's first read asked for quick acknowledgements ([`ack_now`]).
    acked: bool,
}

impl ReadState {
    pub fn new(backend: &str) -> ReadState {
        ReadState {
            buf: BytesMut::with_capacity(READ),
            reader: Reader::new(ID),
            logged: 0,
            backend: backend.into(),
            acked: false,
        }
    }

    /// The next record, reading as needed.
    async fn next(&mut self, conn: &mut Transport) -> Result<Record, ExchangeError> {
        std::future::poll_fn(|cx| self.poll_next(Pin::new(&mut *conn), cx)).await
    }

    fn poll_next(
        &mut self,
        mut conn: Pin<&mut Transport>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Record, ExchangeError>> {
        loop {
            match self.reader.next(&mut self.buf) {
                Ok(Some(r)) => return Poll::Ready(Ok(r)),
                Ok(None) => {}
                Err(e) => return Poll::Ready(Err(ExchangeError::Invalid(e.to_string()))),
            }
            self.buf.reserve(READ);
            let spare = self.buf.spare_capacity_mut();
            let mut rb = ReadBuf::uninit(spare);
            std::task::ready!(conn.as_mut().poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(Err(ExchangeError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the FastCGI connection closed before the end of the request",
                ))));
            }
            // SAFETY: `poll_read` initialised the first `n` bytes of the spare capacity.
            unsafe { self.buf.set_len(self.buf.len() + n) };
            if !self.acked {
                self.acked = true;
                ack_now(conn.as_ref().get_ref());
            }
        }
    }

    /// An application's error output into the log, up to [`STDERR_LOGGED`] per request.
    fn log(&mut self, bytes: &[u8]) {
        if self.logged >= STDERR_LOGGED {
            return;
        }
        let take = bytes.len().min(STDERR_LOGGED - self.logged);
        self.logged += take;
        let text = String::from_utf8_lossy(&bytes[..take]);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            tracing::warn!(backend = %self.backend, "FastCGI stderr: {line}");
        }
        if self.logged >= STDERR_LOGGED {
            tracing::warn!(backend = %self.backend, "FastCGI stderr: more output not logged");
        }
    }
}

/// Acknowledges what was just read at once instead of after the delayed-ACK timer (40 ms on
/// Linux). PHP-FPM writes a response in several writes (the head's record, the body's, the
/// last record with END_REQUEST) without TCP_NODELAY: on a kept connection, which the kernel
/// treats as interactive after the first exchange, its last small write waited for the ACK
/// of the one before, which waited for the delayed-ACK timer — every PHP page on a kept
/// connection took ~40 ms more (bench/ab2009.sh phpinfo: ~245 req/s at 0.18 CPU, Shellac
/// and nginx alike). Asked once per exchange, after its first read: the kernel puts the
/// connection back in interactive mode only when Shellac sends (the next request), so the
/// rest of the answer is acknowledged as it is read (asking after every read cost ~7 more
/// system calls a `phpinfo()` page, bench/RESULTS.md).
fn ack_now(conn: &Transport) {
    #[cfg(target_os = "linux")]
    if let Transport::Tcp(tcp) = conn {
        let _ = socket2::SockRef::from(tcp).set_tcp_quickack(true);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = conn;
}

/// The response body: the STDOUT records after the head, until END_REQUEST; the connection
/// goes back to the pool then (when kept), and is closed if the body is dropped before.
pub(super) struct StdoutBody {
    conn: Option<Transport>,
    state: ReadState,
    first: Option<Bytes>,
    pool: Option<Arc<Pool>>,
    done: bool,
}

impl StdoutBody {
    pub fn new(conn: Transport, state: ReadState, first: Bytes, pool: Option<Arc<Pool>>) -> Self {
        StdoutBody {
            conn: Some(conn),
            state,
            first: (!first.is_empty()).then_some(first),
            pool,
            done: false,
        }
    }
}

impl Body for StdoutBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            let record = match std::task::ready!(this.state.poll_next(Pin::new(conn), cx)) {
                Ok(r) => r,
                Err(e) => {
                    this.done = true;
                    this.conn = None;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
            };
            match record {
                Record::Stdout(b) if b.is_empty() => {}
                Record::Stdout(b) => return Poll::Ready(Some(Ok(Frame::data(b)))),
                Record::Stderr(b) => this.state.log(&b),
                Record::Ignored => {}
                Record::End(end) => {
                    this.done = true;
                    let conn = this.conn.take();
                    if end.protocol_status != ProtocolStatus::RequestComplete {
                        return Poll::Ready(Some(Err(Box::new(ExchangeError::Invalid(format!(
                            "the application ended the request: {:?}",
                            end.protocol_status
                        ))))));
                    }
                    if let (Some(pool), Some(conn)) = (this.pool.take(), conn) {
                        pool.checkin(conn);
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.first.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Mutex;

    use super::*;

    /// The log lines written while a test runs.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Regression (bench/ab2009.sh phpinfo, ~245 req/s latency-bound): a bodiless request is
    /// one write, and the first read of an answer on a kept TCP connection takes it out of
    /// interactive (delayed-ACK) mode for the rest of the answer, so the application's last
    /// small write never waits for a delayed ACK.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_kept_connection_acknowledges_every_read_at_once() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut app, _) = listener.accept().await.unwrap();
        let mut conn = Transport::Tcp(client);
        let body = RequestBody::empty();
        send(&mut conn, b"\x04\x01Ax", body, true).await.unwrap();
        let mut expected = BytesMut::new();
        record::begin_request(&mut expected, ID, true);
        record::stream(&mut expected, record::Kind::Params, ID, b"\x04\x01Ax");
        record::end_stream(&mut expected, record::Kind::Params, ID);
        record::end_stream(&mut expected, record::Kind::Stdin, ID);
        let mut got = vec![0; expected.len()];
        app.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected.to_vec());
        // The kernel's interactive (delayed-ACK) mode, as a kept connection is in after its
        // first exchange.
        let Transport::Tcp(tcp) = &conn else {
            unreachable!()
        };
        socket2::SockRef::from(tcp).set_tcp_quickack(false).unwrap();
        assert!(!socket2::SockRef::from(tcp).tcp_quickack().unwrap());
        let mut out = BytesMut::new();
        record::stream(&mut out, record::Kind::Stdout, ID, b"Status: 200\r\n\r\n");
        app.write_all(&out).await.unwrap();
        let mut state = ReadState::new("php");
        let (head, rest) = read_head(&mut conn, &mut state, 1024, 10).await.unwrap();
        assert_eq!(head.status, http::StatusCode::OK);
        assert!(rest.is_empty());
        let Transport::Tcp(tcp) = &conn else {
            unreachable!()
        };
        assert!(socket2::SockRef::from(tcp).tcp_quickack().unwrap());
        assert!(state.acked);
        // Asked once per exchange: the rest of the answer, in several writes, is read with
        // the connection still out of interactive mode (Shellac sends nothing meanwhile).
        let tcp_ref = socket2::SockRef::from(tcp).try_clone().unwrap();
        let mut body = StdoutBody::new(conn, state, Bytes::new(), None);
        for piece in [&b"hello "[..], b"world"] {
            out.clear();
            record::stream(&mut out, record::Kind::Stdout, ID, piece);
            app.write_all(&out).await.unwrap();
            let frame = body.frame().await.unwrap().unwrap();
            assert_eq!(frame.into_data().unwrap(), piece);
            assert!(tcp_ref.tcp_quickack().unwrap());
        }
        out.clear();
        record::end_stream(&mut out, record::Kind::Stdout, ID);
        out.extend_from_slice(&[1, 3, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        app.write_all(&out).await.unwrap();
        assert!(body.frame().await.is_none());
        assert!(tcp_ref.tcp_quickack().unwrap());
    }

    /// What an application writes to FCGI_STDERR reaches Shellac's log, at most
    /// [`STDERR_LOGGED`] bytes per request, then one line saying the rest was not logged.
    #[test]
    fn stderr_is_logged_up_to_its_bound() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let mut state = ReadState::new("php");
            state.log(b"PHP Warning:  Undefined variable $x\n\n");
            let line = format!("{}\n", "y".repeat(999));
            for _ in 0..10 {
                state.log(line.as_bytes());
            }
            state.log(b"never logged\n");
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains("FastCGI stderr: PHP Warning:  Undefined variable $x"),
            "{text}"
        );
        assert!(text.contains("backend=php"), "{text}");
        assert_eq!(text.matches("more output not logged").count(), 1, "{text}");
        assert!(!text.contains("never logged"), "{text}");
        let logged = text.matches('y').count();
        assert!(
            logged > 3000 && logged <= STDERR_LOGGED,
            "{logged} bytes of error output logged"
        );
    }
}
