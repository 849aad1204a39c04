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
use crate::backend::{BoxError, RequestBody};
use crate::fastcgi::head::{self, CgiHead};
use crate::fastcgi::record::{self, ProtocolStatus, Reader, Record};

/// The request id: one request per connection at a time.
pub(super) const ID: u16 = 1;
/// Error output logged per request, at most (beyond it, one line says more was not logged).
const STDERR_LOGGED: usize = 4096;
/// Read buffer growth step.
const READ: usize = 16 * 1024;

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
}

impl ReadState {
    pub fn new(backend: &str) -> ReadState {
        ReadState {
            buf: BytesMut::with_capacity(READ),
            reader: Reader::new(ID),
            logged: 0,
            backend: backend.into(),
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
