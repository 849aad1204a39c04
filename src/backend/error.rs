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
