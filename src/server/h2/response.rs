//! The last steps of an HTTP/2 response: the service's future ([`Answer`]), a failed
//! request body's answer, the head made fit for HTTP/2 ([`finish`]), and the body that keeps
//! the stream's bookkeeping ([`H2Body`]).

use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};

use super::state::Stream;
use crate::backend::BodyOutcome;
use crate::http::strict::Violation;
use crate::proxy::{Proxy, ResponseBody};
use crate::server::h1::count_violation;

/// The service's future: the response itself when no step of the request had to wait.
// `Ready` is the common case (a request answered without waiting, a hit): boxing it would
// cost an allocation per such response to spare the rare waiting one a few bytes.
#[allow(clippy::large_enum_variant)]
pub(super) enum Answer<F> {
    Ready(Option<Response<H2Body>>),
    Pending(Pin<Box<F>>),
}

impl<F: Future<Output = Response<H2Body>>> Future for Answer<F> {
    type Output = Result<Response<H2Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Answer::Ready(resp) => match resp.take() {
                Some(r) => Poll::Ready(Ok(r)),
                None => Poll::Pending,
            },
            Answer::Pending(rest) => rest.as_mut().poll(cx).map(Ok),
        }
    }
}

/// The answer to a request whose body failed while streaming to the backend, in place of the
/// aborted fetch's answer: over `max_body_size` (sent without `Content-Length`) → `413` as
/// over HTTP/1.1 (counted as a refused request); too slow → `408` (`client_body_timeout`).
/// The stream then ends; h2 resets it with `NO_ERROR` if the client is still sending.
pub(super) fn body_outcome(
    resp: Response<ResponseBody>,
    outcome: Option<&BodyOutcome>,
    proxy: &Proxy,
) -> Response<ResponseBody> {
    let Some(outcome) = outcome else {
        return resp;
    };
    if outcome.too_large() {
        count_violation(&proxy.counters, Violation::BodyTooLarge);
        return proxy.refuse_body(Violation::BodyTooLarge, resp);
    }
    if outcome.too_slow() {
        proxy.counters.client_body_timeout.inc();
        return proxy.refuse_slow_body(resp);
    }
    resp
}

/// Fields that mean nothing in HTTP/2 (RFC 9113 §8.2.2); hyper would drop them with a
/// warning in the log for every response.
const CONNECTION_SPECIFIC: [header::HeaderName; 5] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::TE,
    header::HeaderName::from_static("keep-alive"),
];

/// Removes what has no meaning in HTTP/2 from a response head (final or 1xx).
pub(super) fn strip_connection_specific(headers: &mut header::HeaderMap) {
    for name in &CONNECTION_SPECIFIC {
        headers.remove(name);
    }
    headers.remove("proxy-connection");
}

/// The last step of every HTTP/2 response: never a 101 (there is no tunnel in HTTP/2), no
/// connection-specific fields; the body ends the stream's bookkeeping, and a malformed
/// request's answer ends with `RST_STREAM` (`reset`).
pub(super) fn finish(
    mut resp: Response<ResponseBody>,
    stream: Stream,
    reset: Option<h2::Reason>,
    proxy: &Proxy,
) -> Response<H2Body> {
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS || resp.status().is_informational() {
        resp = proxy.refuse(502, "backend-invalid-response");
    }
    if let Some(t) = resp
        .extensions_mut()
        .remove::<crate::proxy::SessionTimeouts>()
    {
        // A change wakes the loop, whose timer may be set further out than the new timeout.
        if stream.shared.sess.keep(&t) {
            stream.shared.wake.notify_one();
        }
    }
    strip_connection_specific(resp.headers_mut());
    resp.map(|inner| H2Body {
        inner,
        stream,
        reset,
    })
}

/// A response body on an HTTP/2 stream: the pipeline's body, watched for waiting on the
/// client, optionally ending in a reset.
pub(crate) struct H2Body {
    inner: ResponseBody,
    stream: Stream,
    reset: Option<h2::Reason>,
}

impl Body for H2Body {
    type Data = Bytes;
    type Error = Box<dyn StdError + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        this.stream.set_waiting(false);
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if frame.is_data() {
                    this.stream.first_data();
                }
                // hyper asks again as soon as the client can take more.
                if frame.is_data() && !this.inner.is_end_stream() {
                    this.stream.set_waiting(true);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
            Poll::Ready(None) => match this.reset.take() {
                // hyper resets the stream with the reason it finds in the error.
                Some(reason) => Poll::Ready(Some(Err(Box::new(h2::Error::from(reason))))),
                None => Poll::Ready(None),
            },
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.reset.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.reset.is_some() {
            return SizeHint::default();
        }
        self.inner.size_hint()
    }
}
