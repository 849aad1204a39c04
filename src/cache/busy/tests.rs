//! Coalescing's tests: waiters follow the stream, purges detach a fetch, dropped leaders
//! release waiters.

use super::*;
use crate::cache::CacheKey;
use std::task::Poll;

fn key() -> CacheKey {
    CacheKey::new("example.com", "/")
}

/// A purge during a fetch: the fetch is marked (what it stores is removed again) and later
/// requests lead a fetch of their own.
#[test]
fn a_purge_detaches_the_fetch_in_progress() {
    let table = Arc::new(BusyTable::default());
    let Join::Leader(old) = table.join(&key()) else {
        panic!("first is leader")
    };
    table.mark_purged(&key());
    assert!(old.object().is_purged());
    let Join::Leader(new) = table.join(&key()) else {
        panic!("a request after the purge leads its own fetch")
    };
    drop(old);
    assert!(
        matches!(table.join(&key()), Join::Waiter(_)),
        "the old leader leaving keeps the new one"
    );
    assert!(!new.object().is_purged());
}

/// Regression: a fetch abandoned, or failed mid-body, is marked a moment before its leader's
/// guard takes it out of the table. A request joining in between was made a waiter, told to
/// look up again (`HeadOutcome::Retry`), joined the same object, and after `MAX_LOOKUPS`
/// turns answered 503 `too-many-lookups`. It now leads a fetch of its own, which the old
/// guard leaves in place. A failure with a status is still shared with joiners.
#[tokio::test]
async fn a_request_joining_a_fetch_that_is_over_leads_its_own() {
    let table = Arc::new(BusyTable::default());
    // Abandoned (the response was not shareable), guard not yet dropped.
    let Join::Leader(old) = table.join(&key()) else {
        panic!("first is leader")
    };
    old.object().abandon();
    let Join::Leader(new) = table.join(&key()) else {
        panic!("a request after the abandon leads its own fetch")
    };
    drop(old);
    assert!(
        matches!(table.join(&key()), Join::Waiter(_)),
        "the old leader leaving keeps the new one"
    );
    drop(new);
    // Failed while streaming (a body error), guard not yet dropped.
    let Join::Leader(old) = table.join(&key()) else {
        panic!("leader")
    };
    old.object().set_head(BusyHead {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        content_length: Some(10),
        vary: Vec::new(),
        delivered: Default::default(),
        object: None,
    });
    old.object().push(Bytes::from_static(b"part"));
    old.object().fail();
    let Join::Leader(new) = table.join(&key()) else {
        panic!("a request after a mid-body failure leads its own fetch")
    };
    drop(old);
    drop(new);
    // Failed with a status for its waiters: a joiner shares it.
    let Join::Leader(old) = table.join(&key()) else {
        panic!("leader")
    };
    old.object()
        .fail_with(StatusCode::GATEWAY_TIMEOUT, "first-byte-timeout");
    let Join::Waiter(busy) = table.join(&key()) else {
        panic!("a joiner shares a failure with a status")
    };
    assert!(matches!(
        busy.wait_head().await,
        HeadOutcome::Failed(StatusCode::GATEWAY_TIMEOUT, "first-byte-timeout")
    ));
    drop(old);
}

#[tokio::test]
async fn waiter_follows_stream() {
    let table = Arc::new(BusyTable::default());
    let Join::Leader(leader) = table.join(&key()) else {
        panic!("first is leader")
    };
    let Join::Waiter(busy) = table.join(&key()) else {
        panic!("second waits")
    };
    let waiter = tokio::spawn(async move {
        let HeadOutcome::Shared(head, mut reader) = busy.wait_head().await else {
            panic!("shared")
        };
        assert_eq!(head.status, StatusCode::OK);
        let mut body = Vec::new();
        loop {
            match poll_fn(|cx| reader.poll_chunk(cx)).await {
                ChunkPoll::Chunk(c) => body.extend_from_slice(&c),
                ChunkPoll::End => break,
                ChunkPoll::Failed => panic!("failed"),
            }
        }
        body
    });
    let obj = leader.object().clone();
    obj.set_head(BusyHead {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        content_length: None,
        vary: vec![],
        delivered: Default::default(),
        object: None,
    });
    obj.push(Bytes::from_static(b"hello "));
    tokio::task::yield_now().await;
    obj.push(Bytes::from_static(b"world"));
    obj.finish();
    drop(leader);
    assert_eq!(waiter.await.unwrap(), b"hello world");
    assert!(table.is_empty());
}

/// Regression (varnishtest c00008, c00026, m00057): a request arriving after the whole
/// body was received but before the fill stored it followed the busy object (a 200 to a
/// conditional request, no vcl_hit). It now waits for the store and looks up again.
#[tokio::test]
async fn a_waiter_after_the_whole_body_looks_up_the_stored_object() {
    let table = Arc::new(BusyTable::default());
    let Join::Leader(mut leader) = table.join(&key()) else {
        panic!("first is leader")
    };
    let obj = leader.object().clone();
    obj.set_head(BusyHead {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        content_length: Some(5),
        vary: vec![],
        delivered: Default::default(),
        object: None,
    });
    obj.push(Bytes::from_static(b"hello"));
    let Join::Waiter(busy) = table.join(&key()) else {
        panic!("second waits")
    };
    let mut wait = Box::pin(busy.wait_head());
    let pending = poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx).is_pending())).await;
    assert!(pending, "waits for the store");
    leader.release();
    obj.finish();
    assert!(matches!(wait.await, HeadOutcome::Retry));
    assert!(matches!(table.join(&key()), Join::Leader(_)));
    // Still streaming (a body of unknown length, or not all of it yet): followed.
    let Join::Leader(leader) = table.join(&CacheKey::new("example.com", "/b")) else {
        panic!()
    };
    leader.object().set_head(BusyHead {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        content_length: Some(5),
        vary: vec![],
        delivered: Default::default(),
        object: None,
    });
    leader.object().push(Bytes::from_static(b"hel"));
    let Join::Waiter(busy) = table.join(&CacheKey::new("example.com", "/b")) else {
        panic!()
    };
    assert!(matches!(busy.wait_head().await, HeadOutcome::Shared(..)));
}

#[tokio::test]
async fn abandoned_and_dropped_leaders_release_waiters() {
    let table = Arc::new(BusyTable::default());
    let Join::Leader(leader) = table.join(&key()) else {
        panic!()
    };
    let Join::Waiter(busy) = table.join(&key()) else {
        panic!()
    };
    leader.object().abandon();
    assert!(matches!(busy.wait_head().await, HeadOutcome::Retry));
    drop(leader);
    let Join::Leader(leader) = table.join(&key()) else {
        panic!("key was released")
    };
    let Join::Waiter(busy) = table.join(&key()) else {
        panic!()
    };
    drop(leader);
    assert!(matches!(busy.wait_head().await, HeadOutcome::Retry));
    let Join::Leader(leader) = table.join(&key()) else {
        panic!("key was released")
    };
    let Join::Waiter(busy) = table.join(&key()) else {
        panic!()
    };
    leader
        .object()
        .fail_with(StatusCode::SERVICE_UNAVAILABLE, "x");
    assert!(matches!(
        busy.wait_head().await,
        HeadOutcome::Failed(StatusCode::SERVICE_UNAVAILABLE, "x")
    ));
}

#[test]
fn trimming_drops_read_chunks() {
    let obj = BusyObject::new();
    obj.set_head(BusyHead {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        content_length: None,
        vary: vec![],
        delivered: Default::default(),
        object: None,
    });
    let mut r = obj.reader();
    obj.start_trimming();
    obj.push(Bytes::from_static(b"a"));
    obj.push(Bytes::from_static(b"b"));
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert!(matches!(
        r.poll_chunk(&mut cx),
        Poll::Ready(ChunkPoll::Chunk(_))
    ));
    assert_eq!(obj.lock().chunks.len(), 1);
    assert_eq!(obj.lock().first, 1);
}

/// Regression (varnishtest c00037, c00008): the chunk that completes a known length
/// waits for the fill to settle, so a client that read the body and asks again finds
/// the object stored, not the copy it replaces.
#[test]
fn the_last_chunk_waits_for_the_fill_to_settle() {
    let obj = BusyObject::new();
    obj.set_head(BusyHead {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        content_length: Some(2),
        vary: vec![],
        delivered: Default::default(),
        object: None,
    });
    let mut r = obj.reader();
    obj.push(Bytes::from_static(b"a"));
    obj.push(Bytes::from_static(b"b"));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(matches!(
        r.poll_chunk_settled(&mut cx, Some(2)),
        Poll::Ready(ChunkPoll::Chunk(_))
    ));
    assert!(r.poll_chunk_settled(&mut cx, Some(1)).is_pending());
    obj.finish();
    assert!(matches!(
        r.poll_chunk_settled(&mut cx, Some(1)),
        Poll::Ready(ChunkPoll::Chunk(_))
    ));
    assert!(matches!(
        r.poll_chunk_settled(&mut cx, Some(0)),
        Poll::Ready(ChunkPoll::End)
    ));
}
