//! The interim writer: 1xx heads (103 Early Hints, 102) the service queued for the request
//! in flight, written by the gate before hyper's first byte of the final response.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use bytes::Buf;
use tokio::io::AsyncWrite;

use super::Gate;
use super::conn::{ConnState, note_write};

/// 1xx heads forwarded per request at most; more are dropped (the same bound over HTTP/2).
const MAX_INTERIM: usize = crate::proxy::MAX_INTERIM;

/// The service hands a request's 1xx heads to the connection (`proxy/interim.rs`).
impl crate::proxy::InterimSink for ConnState {
    fn send(&self, head: crate::proxy::InterimHead) -> bool {
        let request = self.requests.load(Ordering::Relaxed);
        let Ok(mut queue) = self.interim.lock() else {
            return false;
        };
        if queue.request != request {
            queue.request = request;
            queue.queued = 0;
        }
        if queue.queued >= MAX_INTERIM {
            return false;
        }
        queue.queued += 1;
        queue
            .heads
            .push_back((request, crate::proxy::serialise_interim(&head)));
        self.interim_queued.store(true, Ordering::Release);
        true
    }
}

impl<T> Gate<T> {
    /// Writes the 1xx heads queued for the request in flight, before any byte hyper writes for
    /// it. Only while hyper has written nothing since it flushed everything before this request
    /// (`flushed_at`): then every byte on the wire so far belongs to earlier responses and the
    /// next ones hyper writes are this request's final response. Otherwise (a pipelined
    /// request whose predecessor's bytes are still in hyper's buffer, hyper already writing the
    /// final response, a head left from an earlier request) a head is dropped: it could not go
    /// out in order. Counted in `client_interim` / `client_interim_dropped`.
    pub(super) fn poll_interim(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>
    where
        T: AsyncWrite + Unpin,
    {
        loop {
            if self.interim.is_empty() {
                if !self.state.interim_queued.load(Ordering::Acquire) {
                    return Poll::Ready(Ok(()));
                }
                let next = match self.state.interim.lock() {
                    Ok(mut queue) => {
                        let next = queue.heads.pop_front();
                        if queue.heads.is_empty() {
                            self.state.interim_queued.store(false, Ordering::Release);
                        }
                        next
                    }
                    Err(_) => None,
                };
                let Some((request, head)) = next else {
                    return Poll::Ready(Ok(()));
                };
                let current = self.state.requests.load(Ordering::Relaxed);
                if request != current || self.flushed_at.wrapping_add(1) != current {
                    self.counters.client_interim_dropped.inc();
                    continue;
                }
                self.counters.client_interim.inc();
                self.interim = head;
            }
            let Some(io) = self.inner.as_mut() else {
                return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
            };
            let polled = Pin::new(io).poll_write(cx, &self.interim);
            note_write(&self.state, polled.is_pending(), &mut self.clock);
            let n = ready!(polled)?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.interim.advance(n);
        }
    }
}
