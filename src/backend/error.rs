//! Why a backend fetch failed ([`FetchError`]): the status Shellac answers with, the word for
//! `Cache-Status` and logs, and whether another backend may be tried.

use http::StatusCode;

/// The error type of a body stream from an origin kind that is not hyper's.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a backend fetch failed; decides the status Shellac answers with and whether another
/// backend may be tried.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("connection to backend {0} failed: {1}")]
    Connect(String, std::io::Error),
    #[error("connection to backend {0} timed out")]
    ConnectTimeout(String),
    #[error("backend {0} is at max_connections and its queue is full")]
    Busy(String),
    #[error("backend {0} sent no response within first_byte_timeout")]
    FirstByteTimeout(String),
    #[error("backend {0} failed: {1}")]
    Failed(String, BoxError),
    #[error("backend {0} sent an invalid response: {1}")]
    Invalid(String, &'static str),
}

impl FetchError {
    /// 503 when the backend is unreachable or busy, 504 when it is too slow, 502 when it
    /// misbehaves.
    pub fn status(&self) -> StatusCode {
        match self {
            FetchError::Connect(..) | FetchError::ConnectTimeout(_) | FetchError::Busy(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            FetchError::FirstByteTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            FetchError::Failed(..) | FetchError::Invalid(..) => StatusCode::BAD_GATEWAY,
        }
    }

    /// Word for `Cache-Status` detail and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            FetchError::Connect(..) => "backend-connect-failed",
            FetchError::ConnectTimeout(_) => "backend-connect-timeout",
            FetchError::Busy(_) => "backend-busy",
            FetchError::FirstByteTimeout(_) => "backend-first-byte-timeout",
            FetchError::Failed(..) => "backend-error",
            FetchError::Invalid(..) => "backend-invalid-response",
        }
    }

    /// What Varnish's `FetchError` record says of it (`cache_backend.c`, `cache_http1_fetch.c`):
    /// `backend NAME: fail errno N (TEXT)`, `backend NAME: busy`, `first byte timeout`,
    /// `HTC eof (Unexpected end of input)` (closed before a whole response head),
    /// `http format error`.
    pub fn varnish_words(&self) -> String {
        match self {
            FetchError::Connect(name, e) => match e.raw_os_error() {
                Some(errno) => format!("backend {name}: fail errno {errno} ({})", errno_text(e)),
                None => format!("backend {name}: fail ({e})"),
            },
            FetchError::ConnectTimeout(name) => {
                let e = std::io::Error::from_raw_os_error(libc::ETIMEDOUT);
                format!(
                    "backend {name}: fail errno {} ({})",
                    libc::ETIMEDOUT,
                    errno_text(&e)
                )
            }
            FetchError::Busy(name) => format!("backend {name}: busy"),
            FetchError::FirstByteTimeout(_) => "first byte timeout".to_string(),
            FetchError::Failed(_, e) if is_stale_connection(&**e) => {
                "HTC eof (Unexpected end of input)".to_string()
            }
            FetchError::Failed(..) | FetchError::Invalid(..) => "http format error".to_string(),
        }
    }

    /// True when the backend certainly did not start answering, so an idempotent request may
    /// be tried on another backend.
    pub fn before_response(&self) -> bool {
        match self {
            FetchError::Connect(..) | FetchError::ConnectTimeout(_) | FetchError::Busy(_) => true,
            FetchError::FirstByteTimeout(_) | FetchError::Invalid(..) => false,
            FetchError::Failed(_, e) => is_stale_connection(&**e),
        }
    }
}

/// An OS error's text without Rust's ` (os error N)`: `Connection refused`, as `strerror`.
fn errno_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Errors that mean "the connection died before an answer", not "the backend answered badly":
/// hyper's canceled, incomplete and closed, or an I/O error under the failure.
pub(super) fn is_stale_connection(e: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(h) = e.downcast_ref::<hyper::Error>()
        && (h.is_canceled() || h.is_incomplete_message() || h.is_closed())
    {
        return true;
    }
    let mut source = Some(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_error_records_in_varnishs_words() {
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        let e = FetchError::Connect("s1".into(), refused);
        assert_eq!(
            e.varnish_words(),
            format!(
                "backend s1: fail errno {} (Connection refused)",
                libc::ECONNREFUSED
            )
        );
        let e = FetchError::ConnectTimeout("s1".into());
        assert_eq!(
            e.varnish_words(),
            format!(
                "backend s1: fail errno {} (Connection timed out)",
                libc::ETIMEDOUT
            )
        );
        assert_eq!(
            FetchError::FirstByteTimeout("s1".into()).varnish_words(),
            "first byte timeout"
        );
        assert_eq!(
            FetchError::Busy("s1".into()).varnish_words(),
            "backend s1: busy"
        );
        assert_eq!(
            FetchError::Invalid("s1".into(), "bad status").varnish_words(),
            "http format error"
        );
    }
}
