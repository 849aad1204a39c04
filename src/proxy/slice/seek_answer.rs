//! A seek's response from slices (`?start=` with an `flv` or `mp4` rule, `seek.rs` cuts it):
//! the cut's head and the slices of its data, or the part of them a `Range` asks for,
//! evaluated with `If-Range` against the cut answer as nginx's range filter takes the flv / mp4
//! module's output. Sent by `serve.rs` like any response from slices.

use http::header::{self, HeaderMap};
use http::{Method, StatusCode};

use super::Ctx;
use super::acquire::SliceSource;
use super::seek::{self, Seek, Wanted};
use super::serve::{Out, last_modified};
use crate::cache::slices::SliceMeta;
use crate::http::conditional::{self, Answer};
use crate::proxy::txn::{Step, Txn};

impl Txn {
    /// The seek asked of this request (an `flv` or `mp4` rule's `?start=`), if any.
    pub(super) fn slice_seek(&self) -> Option<Wanted> {
        match (self.flv_start, self.mp4_start) {
            (Some(start), _) => Some(Wanted::Flv(start)),
            (None, Some((span, max))) => Some(Wanted::Mp4(span, max)),
            (None, None) => None,
        }
    }

    /// A seek's response (`seek.rs`): the cut's head and the slices of its data — or the
    /// part of them a `Range` asks for, evaluated (with `If-Range`) against the cut answer —
    /// or, when there is nothing to cut, the response from slices as without the seek.
    pub(super) async fn sliced_seek(
        &mut self,
        mut ctx: Ctx,
        wanted: Wanted,
        first: Option<(u64, SliceSource)>,
    ) -> Step {
        self.proxy.counters.slice_seek.inc();
        let (cut, read) = match seek::cut(&ctx, wanted).await {
            Ok(cut) => cut,
            // A changed representation looks up again, with the seek still asked.
            Err(failure) => return self.slice_failure(failure),
        };
        self.flv_start = None;
        self.mp4_start = None;
        ctx.seek = Some(read.slices.clone());
        let read = Some(Box::new(read));
        let (status, part, read) = match cut {
            Seek::Cut { head, from, to } => {
                let length = head.len() as u64 + (to - from);
                let (status, (a, b)) = match self.cut_answer(&ctx.meta, length) {
                    Ok(answer) => answer,
                    Err(step) => return *step,
                };
                let hl = head.len() as u64;
                let out = Out {
                    status,
                    prefix: (a < hl).then(|| head.slice(a as usize..(b + 1).min(hl) as usize)),
                    data: (b >= hl).then(|| (from + a.max(hl) - hl, from + b - hl)),
                    range: (status == StatusCode::PARTIAL_CONTENT).then_some((a, b, length)),
                    cut: true,
                    read,
                };
                return self.send(ctx, out, None).await;
            }
            // Nothing cut: the representation, its Range and all.
            Seek::Whole(_) => match self.slice_answer(&ctx.meta) {
                Ok((status, part)) => (status, part, read),
                Err(step) => return *step,
            },
        };
        let out = Out {
            status,
            prefix: None,
            data: Some(part),
            range: (status == StatusCode::PARTIAL_CONTENT).then_some((
                part.0,
                part.1,
                ctx.meta.length,
            )),
            cut: false,
            read,
        };
        self.send(ctx, out, first).await
    }

    /// A `Range` (and `If-Range`) against a seek's answer of `length` bytes, as nginx's range
    /// filter takes the `mp4` / `flv` module's output: its weakened `ETag` never matches an
    /// `If-Range` (RFC 9110 §13.1.5 compares strongly), the file's `Last-Modified` does. The
    /// status and the bytes of the answer to send, or the 416.
    fn cut_answer(
        &mut self,
        meta: &SliceMeta,
        length: u64,
    ) -> Result<(StatusCode, (u64, u64)), Box<Step>> {
        let mut request = HeaderMap::new();
        for name in [header::RANGE, header::IF_RANGE] {
            for v in self.req.headers.get_all(&name) {
                request.append(name.clone(), v.clone());
            }
        }
        let mut fields = HeaderMap::new();
        if let Some(etag) = meta.fields.get(header::ETAG) {
            fields.insert(header::ETAG, etag.clone());
            crate::proxy::filter::weaken_etag(&mut fields);
        }
        let etag = fields.get(header::ETAG).and_then(|v| v.to_str().ok());
        let method = if self.head_only {
            Method::HEAD
        } else {
            Method::GET
        };
        match conditional::evaluate(&method, &request, etag, last_modified(meta), length) {
            Answer::Partial(r) if r.len() == 1 => Ok((StatusCode::PARTIAL_CONTENT, r[0])),
            Answer::Unsatisfiable => Err(Box::new(self.slice_head(
                meta,
                StatusCode::RANGE_NOT_SATISFIABLE,
                length,
            ))),
            // The preconditions were answered on the representation (`slice_answer`).
            _ => Ok((StatusCode::OK, (0, length - 1))),
        }
    }
}
