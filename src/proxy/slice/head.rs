//! A plain `HEAD` on a sliced URL (no seek): the head a `GET` would get (RFC 9110 §9.3.2),
//! from what is known, reading no slice. The fields come from the slice holding the first byte
//! the answer would send when a tier holds it (a hit, with its `Age`); otherwise from one byte
//! of it asked of the origin (`Range: bytes=a-a`, counted in `slice_head_fetch`; nothing
//! stored), which revalidates the representation as a slice fetch does: another version
//! invalidates every slice and the request is looked up again, a `200` (Range ignored) stops
//! slicing the URL.

use http::StatusCode;
use http::header::HeaderMap;
use http_body_util::BodyExt;

use super::acquire::{range_ignored, version_changed};
use super::backend::{Fetched, exchange};
use super::{Ctx, SliceFailure};
use crate::cache::partial::{Validator, content_range};

/// Body bytes of the one-byte answer read at most (to give its connection back to the pool);
/// an origin sending more has its connection closed.
const DRAIN: usize = 64 * 1024;

/// The fields of the representation for a `HEAD` whose answer starts at byte `at`, asked of
/// the origin as one byte; the failure to answer with when they cannot be had.
pub(super) async fn fields_asked(ctx: &Ctx, at: u64) -> Result<HeaderMap, SliceFailure> {
    ctx.proxy.counters.slice_head_fetch.inc();
    let Fetched { parts, body, .. } = match exchange(ctx, (at, at)).await {
        Ok(fetched) => fetched,
        Err((status, detail)) => return Err(SliceFailure::Failed(status, detail)),
    };
    match parts.status {
        StatusCode::PARTIAL_CONTENT => {
            let same = content_range(&parts.headers) == Some((at, at, ctx.meta.length))
                && Validator::of(&parts.headers).as_ref() == Some(&ctx.meta.validator);
            if !same {
                version_changed(ctx);
                return Err(SliceFailure::Changed);
            }
            drain(body).await;
            Ok(parts.headers)
        }
        StatusCode::OK => {
            range_ignored(ctx);
            Err(SliceFailure::Ignored(Box::new((parts, body))))
        }
        _ => Err(SliceFailure::Answer(Box::new((parts, body)))),
    }
}

/// Reads the one-byte body to its end (at most `DRAIN` bytes), so that its connection can
/// carry the next request.
async fn drain(mut body: crate::backend::BackendBody) {
    let mut read = 0;
    while read <= DRAIN {
        match body.frame().await {
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
            _ => return,
        }
    }
}
