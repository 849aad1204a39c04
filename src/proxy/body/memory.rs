//! A body held in memory sent from the stored object's own chunks (the gate's fast answers):
//! the writer borrows the chunks not yet sent and reports what it wrote; counted and recorded
//! as `poll_frame` counts and records what it gives.

use bytes::Bytes;

use super::{Kind, ResponseBody, memory_chunk};
use crate::cache::Body as StoredBody;

impl ResponseBody {
    /// The rest of a body held in memory — a stored object's chunks not yet sent, the first
    /// one from the offset given — for a writer that sends it from the object's own chunks
    /// rather than polling frames (the gate's fast answers: no chunk taken, cloned and
    /// dropped per write). An empty body has no rest. `None` for any other body (and for a
    /// body already polled past its end).
    pub(crate) fn in_memory(&self) -> Option<(&[Bytes], usize)> {
        match &self.kind {
            Kind::Empty => Some((&[], 0)),
            Kind::Object {
                object, next, at, ..
            } => match &object.body {
                StoredBody::Memory(chunks) => Some((chunks.get(*next..)?, *at)),
                StoredBody::Disk(_) => None,
            },
            _ => None,
        }
    }

    /// `n` more bytes of [`Self::in_memory`] were sent: counted as `poll_frame` counts the
    /// chunks it gives (`s_resp_bytes`, the record's bytes); once nothing is left the record
    /// is told the end, as `poll_frame`'s last `None` tells it.
    pub(crate) fn sent_from_memory(&mut self, mut n: usize) {
        if n > 0 {
            if let Some(c) = &self.counters {
                c.s_resp_bytes.add(n as u64);
            }
            if let Some(r) = &mut self.record {
                r.add_bytes(n as u64);
            }
        }
        if let Kind::Object {
            object,
            next,
            at,
            remaining,
        } = &mut self.kind
        {
            *remaining = remaining.saturating_sub(n as u64);
            while n > 0
                && let Some(chunk) = memory_chunk(object, *next)
            {
                let of_chunk = (chunk.len() - *at).min(n);
                n -= of_chunk;
                *at += of_chunk;
                if *at == chunk.len() {
                    *next += 1;
                    *at = 0;
                }
            }
        }
        if self.kind_is_end_stream()
            && let Some(r) = &mut self.record
        {
            r.ended();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use bytes::Bytes;
    use http_body::Body as _;

    use super::ResponseBody;
    use crate::stats::Counters;

    fn object(chunks: &[&'static [u8]]) -> Arc<crate::cache::Object> {
        let mut o = crate::cache::test_object(&[]);
        o.body = crate::cache::Body::Memory(chunks.iter().map(|c| Bytes::from_static(c)).collect());
        o.body_len = chunks.iter().map(|c| c.len() as u64).sum();
        Arc::new(o)
    }

    /// Everything `poll_frame` would give, in order.
    fn polled(mut body: ResponseBody) -> Vec<u8> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut body).poll_frame(&mut cx) {
            out.extend_from_slice(&frame.into_data().unwrap_or_default());
        }
        out
    }

    /// Sent in pieces that cut chunks anywhere: the rest is always what is left, the bytes
    /// are counted once, the end is reached exactly at the last byte, and polling after a
    /// partial send gives the rest.
    #[test]
    fn a_body_in_memory_is_sent_from_its_chunks() {
        let parts: [&'static [u8]; 3] = [b"hello ", b"stored ", b"world"];
        let whole = b"hello stored world";
        for cut in 0..=whole.len() {
            let counters = Arc::new(Counters::default());
            let mut body = ResponseBody::object(object(&parts)).counted(counters.clone());
            let rest = |b: &ResponseBody| {
                let (chunks, at) = b.in_memory().expect("in memory");
                let mut v = Vec::new();
                for (i, c) in chunks.iter().enumerate() {
                    v.extend_from_slice(if i == 0 { &c[at..] } else { &c[..] });
                }
                v
            };
            assert_eq!(rest(&body), whole);
            body.sent_from_memory(cut);
            assert_eq!(rest(&body), &whole[cut..], "after {cut}");
            assert_eq!(counters.s_resp_bytes.get(), cut as u64);
            assert_eq!(http_body::Body::is_end_stream(&body), cut == whole.len());
            // The rest polled as frames (a writer that falls back): the same bytes.
            assert_eq!(polled(body), &whole[cut..], "polled after {cut}");
            assert_eq!(counters.s_resp_bytes.get(), whole.len() as u64);
        }
    }

    #[test]
    fn an_empty_body_has_no_rest_and_other_bodies_are_not_in_memory() {
        let mut empty = ResponseBody::empty();
        assert_eq!(empty.in_memory().map(|(c, at)| (c.len(), at)), Some((0, 0)));
        empty.sent_from_memory(0);
        assert!(http_body::Body::is_end_stream(&empty));
        assert!(
            ResponseBody::full(Bytes::from_static(b"x"))
                .in_memory()
                .is_none()
        );
        assert!(
            ResponseBody::parts(vec![Bytes::from_static(b"x")])
                .in_memory()
                .is_none()
        );
    }
}
