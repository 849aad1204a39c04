//! The body of a response from slices (`serve.rs` builds its head): a seek's prefix, the first
//! slice's bytes, then the slices after it, acquired one after the other by a task that stays
//! at most [`AHEAD`] chunks ahead of the client.

use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::acquire::acquire;
use super::{Ctx, SliceFailure};
use crate::proxy::body::ResponseBody;
use crate::proxy::chunks::{Chunks, FilterError};

/// Chunks the streaming task may be ahead of the client (each at most 256 KiB).
const AHEAD: usize = 8;

/// The body: `prefix` (if any), then `first`'s body and the slices after it up to the last
/// byte (`first`'s `(next index, next byte, last byte)`); `None`: the prefix alone.
pub(super) fn stream(
    ctx: Ctx,
    prefix: Option<Bytes>,
    first: Option<(ResponseBody, (u64, u64, u64))>,
) -> ResponseBody {
    let (tx, rx) = mpsc::channel(AHEAD);
    if let Some(prefix) = prefix {
        // The channel is new and holds `AHEAD` chunks: there is room.
        let _ = tx.try_send(Ok(prefix));
    }
    if let Some((body, next)) = first {
        tokio::spawn(pump(ctx, body, next, tx));
    }
    ResponseBody::filtered(Receiver(rx))
}

/// Streams the first slice's bytes, then slices `next ..` up to byte `end`, into `tx`. A slice
/// that cannot be had (another version, the origin's refusal, a failure) ends the body with an
/// error: the client's connection is cut, never given bytes of two versions.
async fn pump(
    ctx: Ctx,
    mut body: ResponseBody,
    (mut index, mut at, end): (u64, u64, u64),
    tx: mpsc::Sender<Result<Bytes, FilterError>>,
) {
    loop {
        while let Some(frame) = body.frame().await {
            let data = match frame {
                Ok(frame) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue,
                },
                Err(e) => {
                    let _ = tx.send(Err(Box::new(e))).await;
                    return;
                }
            };
            if tx.send(Ok(data)).await.is_err() {
                // The client went away.
                return;
            }
        }
        if at > end {
            return;
        }
        let source = match acquire(&ctx, index).await {
            Ok(source) => source,
            Err(failure) => {
                let why = match failure {
                    SliceFailure::Changed => "the representation changed",
                    SliceFailure::Ignored(..) => "the origin ignored a slice's Range",
                    SliceFailure::Answer(..) => "the origin refused a slice",
                    SliceFailure::Failed(_, detail) => detail,
                };
                tracing::info!(key = %ctx.primary, index, why, "sliced response cut");
                let _ = tx.send(Err(why.into())).await;
                return;
            }
        };
        ctx.count_seek_slice(index);
        let take = (end - at + 1).min(ctx.meta.slice_size);
        body = source.body(0, take);
        at += take;
        index += 1;
    }
}

/// The client's side of the pump.
struct Receiver(mpsc::Receiver<Result<Bytes, FilterError>>);

impl Chunks for Receiver {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        self.0.poll_recv(cx)
    }
}
