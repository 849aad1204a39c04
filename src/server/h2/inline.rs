//! The executor hyper hands each HTTP/2 stream to: the stream is polled once at once, on the
//! connection's own task, and spawned as a task of its own only if it has to wait.
//!
//! hyper's HTTP/2 server spawns one task per stream (`H2Stream`: the service's future, then
//! the response body piped into h2). For a hit from memory the service answers at once
//! (`Answer::Ready`), h2 takes the response head, and the body — the object's chunks — is
//! handed to h2 in the same poll: the whole stream is done before a spawned task would have
//! run. The spawn (a task allocation, a queue push, a wake-up and a poll on another turn of the
//! scheduler) was pure overhead for every such hit. With this executor the stream runs inline
//! while the connection task accepts it; a stream that is not finished after that first poll
//! (a miss, a body waiting for flow-control window) continues as a task exactly as before.
//!
//! The first poll uses a no-op waker: whatever the stream registers with it is registered
//! again by the spawned task's first poll, which happens before anything can depend on it
//! (every future polled here re-registers on each poll, as tokio's and h2's do).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

/// Runs a stream's first poll inline, spawns it if it is not done.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct InlineFirst;

impl<F> hyper::rt::Executor<F> for InlineFirst
where
    F: Future<Output = ()> + Send + Unpin + 'static,
{
    fn execute(&self, mut fut: F) {
        let mut cx = Context::from_waker(Waker::noop());
        if Pin::new(&mut fut).poll(&mut cx).is_pending() {
            tokio::spawn(fut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Executor;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_ready_future_runs_inline_a_waiting_one_is_spawned() {
        let ran = Arc::new(AtomicU32::new(0));
        let r = ran.clone();
        InlineFirst.execute(Box::pin(async move {
            r.fetch_add(1, Ordering::Relaxed);
        }));
        // Done before `execute` returned: no task was needed.
        assert_eq!(ran.load(Ordering::Relaxed), 1);

        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let r = ran.clone();
        InlineFirst.execute(Box::pin(async move {
            let _ = rx.await;
            r.fetch_add(1, Ordering::Relaxed);
            let _ = done_tx.send(());
        }));
        assert_eq!(ran.load(Ordering::Relaxed), 1);
        // The spawned task registered its own waker: the send wakes it.
        tx.send(()).expect("the future waits");
        done_rx.await.expect("the spawned future finishes");
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    }
}
