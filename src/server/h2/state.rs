//! What one HTTP/2 connection's session loop, service and frame watcher share
//! ([`H2State`]), and the bookkeeping of one request on it ([`Stream`]).

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::clock::now_ms;
use crate::server::sess_clocks::SessClocks;

/// What the session loop, the service and the watcher share about one connection.
#[derive(Debug)]
pub(super) struct H2State {
    /// Requests with a response not yet finished (or dropped).
    pub(super) active: AtomicU32,
    /// When `active` last went to 0 (ms, `clock::now_ms`).
    pub(super) idle_since: AtomicU64,
    /// Streams the connection has opened.
    pub(super) requests: AtomicU64,
    /// Response bodies that handed hyper data and have not been asked for more: they wait for
    /// the client (its flow-control window, or the socket).
    pub(super) stalled: AtomicU32,
    /// When a DATA frame was last written (ms).
    pub(super) last_data: AtomicU64,
    /// The client's first frame after the preface arrived.
    pub(super) preface_done: AtomicBool,
    /// When the header block in progress began (ms; 0: none).
    pub(super) block_since: AtomicU64,
    /// `max_requests` reached: the loop sends GOAWAY.
    pub(super) enough: AtomicBool,
    pub(super) wake: Notify,
    /// The timeouts VCL set for this connection (`sess.timeout_idle`, `sess.timeout_linger`,
    /// `sess.idle_send_timeout`; HTTP/2 connections have no total send limit).
    pub(super) sess: SessClocks,
    /// h2's handle for sending 1xx responses on this connection's streams (`interim.rs`),
    /// kept from the first request that carries it.
    pub(super) interim: OnceLock<h2::server::Interim>,
}

impl H2State {
    pub(super) fn new(now: u64) -> H2State {
        H2State {
            active: AtomicU32::new(0),
            idle_since: AtomicU64::new(now),
            requests: AtomicU64::new(0),
            stalled: AtomicU32::new(0),
            last_data: AtomicU64::new(now),
            preface_done: AtomicBool::new(false),
            block_since: AtomicU64::new(0),
            enough: AtomicBool::new(false),
            wake: Notify::new(),
            sess: SessClocks::default(),
            interim: OnceLock::new(),
        }
    }
}

/// One request on the connection, from the service call until its response body is done or
/// dropped (hyper drops it when the client resets the stream).
pub(super) struct Stream {
    pub(super) shared: Arc<H2State>,
    /// The body handed hyper data it has not sent yet (counted in `H2State::stalled`).
    waiting: bool,
}

impl Stream {
    pub(super) fn open(shared: &Arc<H2State>) -> Stream {
        shared.active.fetch_add(1, Ordering::Relaxed);
        Stream {
            shared: shared.clone(),
            waiting: false,
        }
    }

    pub(super) fn set_waiting(&mut self, waiting: bool) {
        if self.waiting != waiting {
            self.waiting = waiting;
            if waiting {
                self.shared.stalled.fetch_add(1, Ordering::Relaxed);
            } else {
                self.shared.stalled.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.set_waiting(false);
        if self.shared.active.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.shared.idle_since.store(now_ms(), Ordering::Relaxed);
        }
    }
}
