//! An include as the assembly reads it ([`Task`]): the body of a fragment answered at once
//! (a stored one), read in place with no task or channel, or the chunks that the task
//! fetching it sends; a body read in place that stalls is handed to such a task.

use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use http_body::Body as _;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::fetch;
use super::include::{AHEAD, Failure, Item, Page};
use crate::esi::Include;
use crate::proxy::body::ResponseBody;

/// An include started: its fragment's body read in place (answered at once: a stored
/// fragment), or its chunks arriving on a channel from the task fetching it; `handle` is
/// `None` for one read in place or settled without a fetch (the depth limit).
pub(super) struct Task {
    pub(super) source: Source,
    pub(super) handle: Option<JoinHandle<()>>,
}

/// Where an include's chunks come from.
pub(super) enum Source {
    /// From the task fetching it.
    Items(mpsc::Receiver<Item>),
    /// Its body, answered at once, read here while its chunks are ready (in a `Mutex` only
    /// for `Sync`, as filters must be: reached through `get_mut`, never locked).
    Body(Box<(Include, Mutex<ResponseBody>)>),
}

impl Task {
    /// A task already settled with `item` (the depth limit, a failure known at once).
    pub(super) fn settled(item: Item) -> Task {
        let (tx, items) = mpsc::channel(1);
        // Room for one item: cannot fail.
        let _ = tx.try_send(item);
        Task {
            source: Source::Items(items),
            handle: None,
        }
    }

    /// The include's next item. A body read in place whose next chunk is not there yet
    /// (a fragment still being fetched by another request) is handed to a task that
    /// streams it within `esi.include_timeout`, as a fetched one would be.
    pub(super) fn poll_item(&mut self, cx: &mut Context<'_>, page: &Arc<Page>) -> Poll<Item> {
        loop {
            let body = match &mut self.source {
                Source::Items(items) => {
                    // The task ended without a word (it panicked): a failure.
                    return items.poll_recv(cx).map(|item| {
                        item.unwrap_or(Item::Failed(Failure::Failed {
                            continue_on_error: false,
                        }))
                    });
                }
                Source::Body(b) => b.1.get_mut().unwrap_or_else(PoisonError::into_inner),
            };
            match std::pin::Pin::new(body).poll_frame(cx) {
                Poll::Ready(None) => return Poll::Ready(Item::End),
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Poll::Ready(Item::Chunk(data));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let Source::Body(b) = &self.source else {
                        continue;
                    };
                    return Poll::Ready(fetch::body_cut(page, &b.0, &e));
                }
                Poll::Pending => {
                    let (tx, items) = mpsc::channel(AHEAD);
                    let Source::Body(b) = std::mem::replace(&mut self.source, Source::Items(items))
                    else {
                        continue;
                    };
                    let (include, body) = *b;
                    let body = body.into_inner().unwrap_or_else(PoisonError::into_inner);
                    self.handle =
                        Some(tokio::spawn(fetch::stream(page.clone(), include, body, tx)));
                }
            }
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // A client gone: the includes it would have waited for stop (their own cache fills
        // go on in their fill tasks).
        if let Some(handle) = &self.handle {
            handle.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::time::Duration;

    use super::super::super::{Chunks, FilterError};
    use crate::esi::Target;

    /// A fragment's body as the test feeds it: chunks as they are sent; its end when the
    /// sender goes; pending (a stall) while neither.
    struct Fed(mpsc::UnboundedReceiver<Bytes>);

    impl Chunks for Fed {
        fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
            self.0.poll_recv(cx).map(|c| c.map(Ok))
        }
    }

    fn page(include_timeout: Duration) -> Arc<Page> {
        let mut config = crate::config::Config::embedded_default();
        config.esi.include_timeout = crate::config::units::Dur(include_timeout);
        let counters = Arc::new(crate::stats::Counters::default());
        let proxy = crate::proxy::Proxy::new(
            Arc::new(config),
            crate::vcl::attach::Programs::default(),
            counters,
        )
        .expect("embedded default config");
        let req = http::Request::get("/page")
            .header("host", "example.com")
            .body(())
            .expect("request")
            .into_parts()
            .0;
        Page::new(proxy, &req, "127.0.0.1:1".parse().expect("addr"), None)
    }

    /// An include read in place, as the assembly reads one answered at once, over `body`.
    fn in_place(body: Fed) -> Task {
        let include = Include {
            src: Target {
                host: None,
                https: false,
                path: "/frag".into(),
            },
            alt: None,
            continue_on_error: false,
        };
        Task {
            source: Source::Body(Box::new((
                include,
                Mutex::new(ResponseBody::filtered(body)),
            ))),
            handle: None,
        }
    }

    async fn next(task: &mut Task, page: &Arc<Page>) -> Item {
        tokio::time::timeout(
            Duration::from_secs(10),
            std::future::poll_fn(|cx| task.poll_item(cx, page)),
        )
        .await
        .expect("an item, never a hang")
    }

    /// A body read in place whose next chunk is not there is handed to a task: what comes
    /// later still reaches the page, in order, and its end too.
    #[tokio::test]
    async fn an_in_place_body_that_pauses_is_streamed_by_a_task() {
        let page = page(Duration::from_secs(30));
        let (tx, rx) = mpsc::unbounded_channel();
        let mut task = in_place(Fed(rx));
        tx.send(Bytes::from_static(b"a")).expect("send");
        assert!(matches!(next(&mut task, &page).await, Item::Chunk(c) if c == "a"));
        assert!(
            task.handle.is_none(),
            "read in place while its chunks are there"
        );
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(task.poll_item(&mut cx, &page).is_pending());
        assert!(task.handle.is_some(), "handed to a task once it stalls");
        tx.send(Bytes::from_static(b"b")).expect("send");
        drop(tx);
        assert!(matches!(next(&mut task, &page).await, Item::Chunk(c) if c == "b"));
        assert!(matches!(next(&mut task, &page).await, Item::End));
    }

    /// A body read in place that stalls for good fails within `esi.include_timeout` (counted),
    /// as a fetched fragment's does: the assembly then drops it or fails per its rules.
    #[tokio::test]
    async fn an_in_place_body_that_stalls_fails_at_the_include_timeout() {
        let page = page(Duration::from_millis(200));
        let (tx, rx) = mpsc::unbounded_channel();
        let mut task = in_place(Fed(rx));
        tx.send(Bytes::from_static(b"part")).expect("send");
        assert!(matches!(next(&mut task, &page).await, Item::Chunk(c) if c == "part"));
        assert!(matches!(
            next(&mut task, &page).await,
            Item::Failed(Failure::Failed {
                continue_on_error: false
            })
        ));
        assert_eq!(page.proxy.counters.esi_include_failed.get(), 1);
        drop(tx);
    }
}
