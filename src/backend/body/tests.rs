//! Unit tests of `body.rs`.

use super::*;
use http_body_util::BodyExt;

/// A body of another origin kind: `chunks`, then (unless `ends`) nothing ever again.
struct Script {
    chunks: VecDeque<&'static str>,
    ends: bool,
}

impl Body for Script {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.chunks.pop_front() {
            Some(c) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(c.as_bytes()))))),
            None if self.ends => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

fn script(chunks: &[&'static str], ends: bool) -> BoxStream {
    Box::pin(Script {
        chunks: chunks.iter().copied().collect(),
        ends,
    })
}

/// Seam 1: a body any origin kind produces is one `BackendBody` to the proxy, read to
/// its end like hyper's.
#[tokio::test]
async fn a_stream_from_any_kind_reads_as_a_backend_body() {
    let counters = Arc::new(Counters::default());
    let body = BackendBody::from_stream(
        script(&["he", "llo"], true),
        Duration::from_secs(60),
        counters,
    );
    let bytes = body.collect().await.unwrap().to_bytes();
    assert_eq!(&bytes[..], b"hello");
}

/// The between-bytes timeout is the body's, not the kind's: a stream that stops sending
/// fails with it and is counted.
#[tokio::test]
async fn a_stream_that_stalls_meets_the_between_bytes_timeout() {
    let counters = Arc::new(Counters::default());
    let mut body = BackendBody::from_stream(
        script(&["part"], false),
        Duration::from_millis(20),
        counters.clone(),
    );
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "part");
    let stalled = body.frame().await.unwrap();
    assert!(matches!(stalled, Err(BackendBodyError::Timeout)));
    assert_eq!(counters.backend_body_timeout.get(), 1);
}

/// A body of another origin kind (HTTP/2, FastCGI, files: not a pooled HTTP/1.1
/// connection, which logs for itself) that fails after its head: `FetchError` in Varnish's
/// words on the backend request's records, and a failed fetch counted (`fetch_failed`, as
/// Varnish counts one whose body breaks).
#[tokio::test]
async fn a_stream_that_fails_logs_fetch_error_and_counts_a_failed_fetch() {
    let counters = Arc::new(Counters::default());
    let vsl = Arc::new(crate::txlog::vsl::Vsl::default());
    vsl.set_capacity(100);
    let tx = crate::txlog::vsl::Transaction::begin(
        vsl.clone(),
        1001,
        crate::txlog::vsl::Side::Backend,
        ("bereq", 1000, "fetch"),
    );
    let mut body = BackendBody::from_stream(
        script(&["part"], false),
        Duration::from_millis(20),
        counters.clone(),
    )
    .with_framing(Framing::Length)
    .with_vsl(Some(Current(Arc::new(tx))));
    assert_eq!(
        body.frame().await.unwrap().unwrap().into_data().unwrap(),
        "part"
    );
    assert!(matches!(
        body.frame().await.unwrap(),
        Err(BackendBodyError::Timeout)
    ));
    assert_eq!(counters.fetch_failed.get(), 1);
    let (records, _) = vsl.since(0);
    assert!(
        records.contains("1001 b FetchError Resource temporarily unavailable\n")
            && records.contains("1001 b FetchError straight insufficient bytes\n"),
        "{records}"
    );
}

/// Only a pooled HTTP/1.1 connection's unused body is drained (the end-to-end cases are in
/// tests/vcl/unused_bodies.rs): another kind's has no connection to keep, so it is dropped
/// unread at once — a stream that never ends does not hold the restart for 100 ms — and
/// counted in neither counter.
#[tokio::test]
async fn an_unused_body_without_a_pooled_connection_is_not_drained() {
    let counters = Arc::new(Counters::default());
    let body = BackendBody::from_stream(
        script(&["part"], false),
        Duration::from_secs(60),
        counters.clone(),
    );
    tokio::time::timeout(
        Duration::from_secs(5),
        body.drain_within(1 << 20, Duration::from_secs(60)),
    )
    .await
    .expect("returns at once");
    assert_eq!(counters.backend_drained.get(), 0);
    assert_eq!(counters.backend_drain_closed.get(), 0);
}
