//! The body-filter seam with test filters: one that uppercases (same length), one that
//! doubles every byte (length changes), one that refuses storage.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;

use super::*;
use crate::backend::{BackendBody, BoxError};
use crate::cache::{Body as StoredBody, Object};
use crate::stats::Counters;

/// Same length: every byte in upper case.
pub(in crate::proxy) struct Upper;

impl BodyFilter for Upper {
    fn name(&self) -> &'static str {
        "upper"
    }

    fn effect(&self, _: StatusCode, _: &HeaderMap) -> Effect {
        Effect::NONE
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        Poll::Ready(
            ready!(input.poll_chunk(cx)).map(|r| r.map(|c| Bytes::from(c.to_ascii_uppercase()))),
        )
    }
}

/// Length changes: every byte twice, and a field saying so.
struct Double;

impl BodyFilter for Double {
    fn name(&self) -> &'static str {
        "double"
    }

    fn effect(&self, _: StatusCode, _: &HeaderMap) -> Effect {
        Effect {
            changes_length: true,
            storable: true,
        }
    }

    fn head(&mut self, fields: &mut HeaderMap) {
        fields.insert("x-doubled", HeaderValue::from_static("1"));
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        Poll::Ready(
            ready!(input.poll_chunk(cx)).map(|r| {
                r.map(|c| Bytes::from(c.iter().flat_map(|b| [*b, *b]).collect::<Vec<u8>>()))
            }),
        )
    }
}

/// Passes bytes through and says they may not be stored.
pub(in crate::proxy) struct NoStore;

impl BodyFilter for NoStore {
    fn name(&self) -> &'static str {
        "no-store"
    }

    fn effect(&self, _: StatusCode, _: &HeaderMap) -> Effect {
        Effect {
            changes_length: false,
            storable: false,
        }
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        input.poll_chunk(cx)
    }
}

pub(in crate::proxy) fn chain(filters: Vec<Box<dyn BodyFilter>>) -> Chain {
    let mut c = Chain::default();
    for f in filters {
        c.push(f);
    }
    c
}

/// Chunks given out one by one.
struct Script(VecDeque<&'static str>);

impl Chunks for Script {
    fn poll_chunk(&mut self, _: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        Poll::Ready(
            self.0
                .pop_front()
                .map(|c| Ok(Bytes::from_static(c.as_bytes()))),
        )
    }
}

impl Body for Script {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(
            self.0
                .pop_front()
                .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes())))),
        )
    }
}

fn script(chunks: &[&'static str]) -> Script {
    Script(chunks.iter().copied().collect())
}

/// Every chunk a chunk source gives, in order.
async fn chunks(mut source: impl Chunks) -> Vec<Bytes> {
    let mut out = Vec::new();
    while let Some(c) = std::future::poll_fn(|cx| source.poll_chunk(cx)).await {
        out.push(c.unwrap());
    }
    out
}

fn fields(pairs: &[(&str, &str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
        .collect()
}

#[tokio::test]
async fn a_chain_streams_each_chunk_through_its_filters_in_order() {
    let out = chunks(chain(vec![Box::new(Upper)]).over(script(&["ab", "cd"]))).await;
    assert_eq!(
        out,
        ["AB", "CD"],
        "one chunk out per chunk in, as they come"
    );
    let both = chunks(chain(vec![Box::new(Upper), Box::new(Double)]).over(script(&["ab"]))).await;
    assert_eq!(both, ["AABB"]);
}

#[test]
fn an_empty_chain_leaves_the_fields_as_they_are() {
    let before = fields(&[("content-length", "5"), ("etag", "\"v1\"")]);
    let mut after = before.clone();
    let effect = fetch_head(&mut Chain::default(), StatusCode::OK, &mut after, false);
    assert_eq!(effect, Effect::NONE);
    assert_eq!(after, before);
}

#[test]
fn a_length_change_drops_content_length_and_weakens_the_etag() {
    let mut f = fields(&[
        ("content-length", "5"),
        ("etag", "\"v1\""),
        ("content-type", "text/plain"),
    ]);
    let effect = fetch_head(
        &mut chain(vec![Box::new(Double)]),
        StatusCode::OK,
        &mut f,
        false,
    );
    assert!(effect.changes_length && effect.storable);
    assert!(f.get(header::CONTENT_LENGTH).is_none());
    assert_eq!(f[header::ETAG], "W/\"v1\"");
    assert_eq!(f["x-doubled"], "1", "the filter's own fields");
    assert_eq!(f[header::CONTENT_TYPE], "text/plain");
    // Weak already: left as it is.
    let mut weak = fields(&[("etag", "W/\"v1\"")]);
    chain(vec![Box::new(Double)]).head(effect, &mut weak);
    assert_eq!(weak[header::ETAG], "W/\"v1\"");
}

#[test]
fn a_filter_that_refuses_storage_makes_the_response_unstorable() {
    let mut f = fields(&[("content-length", "5"), ("etag", "\"v1\"")]);
    let effect = fetch_head(
        &mut chain(vec![Box::new(Upper), Box::new(NoStore)]),
        StatusCode::OK,
        &mut f,
        false,
    );
    // fetch/decide.rs turns this into NoCacheReason::Filter.
    assert!(!effect.storable);
    assert_eq!(f[header::CONTENT_LENGTH], "5", "same length: kept");
    assert_eq!(
        f[header::ETAG],
        "\"v1\"",
        "same bytes' length: still strong"
    );
}

#[test]
fn pieces_and_refreshes_are_never_fetch_filtered() {
    for (status, refreshed) in [
        (StatusCode::PARTIAL_CONTENT, false),
        (StatusCode::RANGE_NOT_SATISFIABLE, false),
        (StatusCode::NOT_MODIFIED, false),
        (StatusCode::OK, true),
    ] {
        let mut c = chain(vec![Box::new(Double)]);
        let mut f = fields(&[("content-length", "5")]);
        assert_eq!(fetch_head(&mut c, status, &mut f, refreshed), Effect::NONE);
        assert!(c.is_empty(), "{status} {refreshed}: the chain is dropped");
        assert_eq!(f[header::CONTENT_LENGTH], "5");
    }
}

#[tokio::test]
async fn a_fetched_body_is_sent_on_through_the_fetch_chain() {
    let backend = || {
        BackendBody::from_stream(
            Box::pin(script(&["he", "llo"])),
            Duration::from_secs(60),
            Arc::new(Counters::default()),
        )
    };
    let plain = fetched(backend(), Chain::default());
    assert_eq!(plain.collect().await.unwrap().to_bytes(), "hello");
    let upper = fetched(backend(), chain(vec![Box::new(Upper)]));
    assert_eq!(upper.collect().await.unwrap().to_bytes(), "HELLO");
}

fn stored(body: &'static str) -> Arc<Object> {
    let mut o = crate::cache::test_object(&[
        ("etag", "\"v1\""),
        ("content-type", "text/plain"),
        ("accept-ranges", "bytes"),
    ]);
    o.body = StoredBody::Memory(smallvec::smallvec![
        Bytes::from_static(&body.as_bytes()[..3]),
        Bytes::from_static(&body.as_bytes()[3..]),
    ]);
    o.body_len = body.len() as u64;
    Arc::new(o)
}

fn deliver(c: &mut Chain, request: &[(&str, &str)], method: Method) -> Response<ResponseBody> {
    let obj = stored("hello world");
    let now = obj.stored_at;
    let head_only = method == Method::HEAD;
    object(
        c,
        obj,
        &method,
        &fields(request),
        head_only,
        now,
        "shellac; hit",
    )
}

async fn text(resp: Response<ResponseBody>) -> String {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn delivery_without_filters_is_the_plain_delivery() {
    let resp = deliver(
        &mut Chain::default(),
        &[("range", "bytes=6-10")],
        Method::GET,
    );
    assert_eq!(resp.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(resp.headers()[header::CONTENT_RANGE], "bytes 6-10/11");
    assert_eq!(text(resp).await, "world");
}

#[tokio::test]
async fn delivery_through_a_same_length_filter_answers_range_over_the_filtered_bytes() {
    let mut c = chain(vec![Box::new(Upper)]);
    let full = deliver(&mut c, &[], Method::GET);
    assert!(c.is_empty(), "the request's chain is used up");
    assert_eq!(full.status(), StatusCode::OK);
    assert_eq!(full.headers()[header::CONTENT_LENGTH], "11");
    assert_eq!(full.headers()[header::ETAG], "\"v1\"");
    assert_eq!(text(full).await, "HELLO WORLD");

    let resp = deliver(
        &mut chain(vec![Box::new(Upper)]),
        &[("range", "bytes=6-10")],
        Method::GET,
    );
    assert_eq!(resp.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(resp.headers()[header::CONTENT_RANGE], "bytes 6-10/11");
    assert_eq!(resp.headers()[header::CONTENT_LENGTH], "5");
    assert_eq!(text(resp).await, "WORLD");

    // Several ranges: one 200 with the whole filtered body.
    let multi = deliver(
        &mut chain(vec![Box::new(Upper)]),
        &[("range", "bytes=0-1,6-7")],
        Method::GET,
    );
    assert_eq!(multi.status(), StatusCode::OK);
    assert_eq!(text(multi).await, "HELLO WORLD");

    // Past the end: 416 as without a filter (the length is the same).
    let beyond = deliver(
        &mut chain(vec![Box::new(Upper)]),
        &[("range", "bytes=50-60")],
        Method::GET,
    );
    assert_eq!(beyond.status(), StatusCode::RANGE_NOT_SATISFIABLE);
}

#[tokio::test]
async fn delivery_through_a_length_changing_filter_ignores_range() {
    for range in ["bytes=0-1", "bytes=50-60"] {
        let resp = deliver(
            &mut chain(vec![Box::new(Double)]),
            &[("range", range)],
            Method::GET,
        );
        assert_eq!(resp.status(), StatusCode::OK, "{range}");
        let h = resp.headers();
        assert!(h.get(header::CONTENT_LENGTH).is_none());
        assert!(h.get(header::CONTENT_RANGE).is_none());
        assert!(h.get(header::ACCEPT_RANGES).is_none());
        assert_eq!(h[header::ETAG], "W/\"v1\"");
        assert_eq!(h["x-doubled"], "1");
        assert_eq!(text(resp).await, "hheelllloo  wwoorrlldd");
    }
}

#[tokio::test]
async fn conditionals_and_head_get_the_fields_without_a_filtered_body() {
    let resp = deliver(
        &mut chain(vec![Box::new(Double)]),
        &[("if-none-match", "W/\"v1\"")],
        Method::GET,
    );
    assert_eq!(resp.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(resp.headers()[header::ETAG], "W/\"v1\"");
    assert_eq!(
        text(resp).await,
        "",
        "no body for a 304, not even a filter's"
    );

    let head = deliver(&mut chain(vec![Box::new(Double)]), &[], Method::HEAD);
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(head.headers()["x-doubled"], "1");
    assert!(head.headers().get(header::CONTENT_LENGTH).is_none());
    assert_eq!(text(head).await, "");
}

#[test]
fn an_empty_chain_allocates_nothing() {
    let c = Chain::default();
    assert_eq!(c.filters.capacity(), 0);
}

#[tokio::test]
async fn a_streamed_response_goes_through_the_delivery_chain() {
    let mut f = fields(&[("content-length", "5"), ("accept-ranges", "bytes")]);
    let (body, len) = streamed(
        &mut chain(vec![Box::new(Upper)]),
        StatusCode::OK,
        &mut f,
        ResponseBody::full("hello"),
        Some(5),
    );
    assert_eq!(len, Some(5), "same length: a Range can be cut from it");
    assert_eq!(body.collect().await.unwrap().to_bytes(), "HELLO");

    let (body, len) = streamed(
        &mut chain(vec![Box::new(Double)]),
        StatusCode::OK,
        &mut f,
        ResponseBody::full("hello"),
        Some(5),
    );
    assert_eq!(len, None, "length changed: sent whole, Range ignored");
    assert!(f.get(header::CONTENT_LENGTH).is_none());
    assert!(f.get(header::ACCEPT_RANGES).is_none());
    assert_eq!(body.collect().await.unwrap().to_bytes(), "hheelllloo");

    let mut c = chain(vec![Box::new(Double)]);
    let mut piece = fields(&[("content-length", "2")]);
    let (body, len) = streamed(
        &mut c,
        StatusCode::PARTIAL_CONTENT,
        &mut piece,
        ResponseBody::full("he"),
        Some(2),
    );
    assert!(c.is_empty());
    assert_eq!(
        (len, &piece[header::CONTENT_LENGTH]),
        (Some(2), &"2".parse::<HeaderValue>().unwrap())
    );
    assert_eq!(body.collect().await.unwrap().to_bytes(), "he");
}
