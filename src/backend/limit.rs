//! A backend's connection limit (`max_connections`) with its bounded queue (`max_queue`,
//! waits bounded by `wait_timeout`, else `connect_timeout`; counted in `backend_wait` and, past
//! it, `backend_wait_fail`), and the gauge of requests in flight: a request holds a
//! [`Lease`] from before it connects until its response body is finished or dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::endpoint::Endpoint;
use super::error::FetchError;

/// Requests in flight on one backend, and those waiting for a slot.
pub(crate) struct Limit {
    /// `max_connections` slots (none when it is 0: no limit).
    slots: Option<Arc<Semaphore>>,
    queued: AtomicUsize,
    in_flight: AtomicI64,
}

/// Held while a request is in flight on a backend: the connection-limit permit and the
/// in-flight gauge. Released when the response body is finished or dropped.
pub(crate) struct Lease {
    limit: Arc<Limit>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.limit.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One request waiting for a connection slot, counted in `Limit::queued` while it lives.
struct InQueue<'a>(&'a AtomicUsize);

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Limit {
    /// `max_connections` slots; 0: no limit.
    pub(super) fn new(max_connections: usize) -> Limit {
        Limit {
            slots: (max_connections > 0).then(|| Arc::new(Semaphore::new(max_connections))),
            queued: AtomicUsize::new(0),
            in_flight: AtomicI64::new(0),
        }
    }

    /// Requests in flight right now.
    pub(super) fn in_flight(&self) -> i64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Requests waiting for a connection slot right now.
    pub(super) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Waits for a connection slot under `max_connections` (bounded queue, bounded wait);
    /// a refusal is counted in `endpoint`'s counters.
    pub(super) async fn lease(self: &Arc<Self>, endpoint: &Endpoint) -> Result<Lease, FetchError> {
        let permit = match &self.slots {
            None => None,
            Some(sem) => match sem.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    let waiting = self.queued.fetch_add(1, Ordering::Relaxed);
                    // Leaves the queue however the wait ends: also when the request is
                    // dropped while it waits (its client went away).
                    let _in_queue = InQueue(&self.queued);
                    let got = if waiting >= endpoint.config.max_queue {
                        None
                    } else {
                        endpoint.counters.backend_wait.inc();
                        let wait = endpoint
                            .config
                            .wait_timeout
                            .as_ref()
                            .map_or(endpoint.config.connect_timeout.0, |d| d.0);
                        let got = tokio::time::timeout(wait, sem.clone().acquire_owned())
                            .await
                            .ok()
                            .and_then(Result::ok);
                        if got.is_none() {
                            endpoint.counters.backend_wait_fail.inc();
                        }
                        got
                    };
                    drop(_in_queue);
                    match got {
                        Some(p) => Some(p),
                        None => {
                            endpoint.counters.backend_busy.inc();
                            endpoint.stats.busy.inc();
                            return Err(FetchError::Busy(endpoint.config.name.clone()));
                        }
                    }
                }
            },
        };
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Ok(Lease {
            limit: self.clone(),
            _permit: permit,
        })
    }
}
