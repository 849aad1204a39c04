//! Checking a body as it passes, unchanged (`testgunzip`, `testdecode`): each chunk is held
//! until the next one is checked, or the end, so the last bytes go out only once the body is
//! known whole — a malformed or truncated body is cut, never ended as if whole (a truncated
//! one with a `Content-Length` still ends short).

use std::task::{Context, Poll};

use bytes::Bytes;

use super::{Chunks, FilterError};

/// A filter that checks the chunks it passes on, holding the last one back.
pub(super) trait HeldCheck {
    type Error;
    /// The chunk held back until the next one is checked.
    fn held(&mut self) -> &mut Option<Bytes>;
    /// Checks the next chunk of the body.
    fn check(&mut self, chunk: &Bytes) -> Result<(), Self::Error>;
    /// The input ended: whether the body was whole.
    fn end(&mut self) -> Result<(), Self::Error>;
    /// Counts a body that failed its check, remembers the failure, and says it.
    fn malformed(&mut self, e: Self::Error) -> FilterError;
}

/// The next chunk `filter` passes on: the one it held, once the next one checked, or once the
/// input ended whole. An error of the input passes through.
pub(super) fn poll_held(
    cx: &mut Context<'_>,
    input: &mut dyn Chunks,
    filter: &mut impl HeldCheck,
) -> Poll<Option<Result<Bytes, FilterError>>> {
    let result = loop {
        match input.poll_chunk(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
            Poll::Ready(Some(Ok(chunk))) => {
                if let Err(e) = filter.check(&chunk) {
                    break Err(e);
                }
                if let Some(before) = filter.held().replace(chunk) {
                    break Ok(Some(before));
                }
            }
            Poll::Ready(None) => break filter.end().map(|()| filter.held().take()),
        }
    };
    match result {
        Ok(chunk) => Poll::Ready(chunk.map(Ok)),
        Err(e) => Poll::Ready(Some(Err(filter.malformed(e)))),
    }
}
