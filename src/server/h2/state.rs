//! What one HTTP/2 connection's session loop, service and frame watcher share
//! ([`H2State`]), and the bookkeeping of one request on it ([`Stream`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio::sync::Notify;

use crate::clock::now_ms;
use crate::server::sess_clocks::SessClocks;
use crate::vcl::run::SessTimeout;

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
    /// `sess.send_timeout`, `sess.idle_send_timeout`).
    pub(super) sess: SessClocks,
    /// `server.send_total_timeout` (ms; 0: no limit) when the connection opened: what
    /// `sess.send_timeout` is until VCL sets it.
    pub(super) send_total: u64,
    /// The responses being sent while a total send limit applied when they began
    /// ([`Stream::first_data`]): the timer ends the connection when one of them waits for
    /// the client past it ([`H2State::sending_too_long`]).
    sending: Mutex<Vec<Weak<Sending>>>,
    /// h2's handle for sending 1xx responses on this connection's streams (`interim.rs`),
    /// kept from the first request that carries it.
    pub(super) interim: OnceLock<h2::server::Interim>,
}

impl H2State {
    pub(super) fn new(now: u64, send_total: u64) -> H2State {
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
            send_total,
            sending: Mutex::new(Vec::new()),
            interim: OnceLock::new(),
        }
    }

    /// The total send limit now (ms; 0: none): VCL's `sess.send_timeout`, else the setting.
    pub(super) fn send_total(&self) -> u64 {
        self.sess.ms(SessTimeout::Send, self.send_total)
    }

    /// Whether a response that waits for the client began sending `total` ms or more before
    /// `now` (the ones that ended are forgotten here).
    pub(super) fn sending_too_long(&self, now: u64, total: u64) -> bool {
        let mut sending = self.sending.lock().unwrap_or_else(PoisonError::into_inner);
        sending.retain(|s| s.strong_count() > 0);
        sending
            .iter()
            .filter_map(Weak::upgrade)
            .any(|s| s.waiting.load(Ordering::Relaxed) && now >= s.since.saturating_add(total))
    }
}

/// A response sent under a total send limit: when its first DATA went to hyper, and whether
/// it waits for the client now.
#[derive(Debug)]
struct Sending {
    since: u64,
    waiting: AtomicBool,
}

/// One request on the connection, from the service call until its response body is done or
/// dropped (hyper drops it when the client resets the stream).
pub(super) struct Stream {
    pub(super) shared: Arc<H2State>,
    /// The body handed hyper data it has not sent yet (counted in `H2State::stalled`).
    waiting: bool,
    /// Its first DATA went out (`first_data`).
    began: bool,
    /// Watched by the timer for the total send limit, if one applied when it began.
    sending: Option<Arc<Sending>>,
}

impl Stream {
    pub(super) fn open(shared: &Arc<H2State>) -> Stream {
        shared.active.fetch_add(1, Ordering::Relaxed);
        Stream {
            shared: shared.clone(),
            waiting: false,
            began: false,
            sending: None,
        }
    }

    /// The response's first DATA frame goes to hyper: from now on it is held to the total
    /// send limit in force (`sess.send_timeout`, `server.send_total_timeout`), if any.
    pub(super) fn first_data(&mut self) {
        if self.began {
            return;
        }
        self.began = true;
        if self.shared.send_total() == 0 {
            return;
        }
        let sending = Arc::new(Sending {
            since: now_ms(),
            waiting: AtomicBool::new(self.waiting),
        });
        self.shared
            .sending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&sending));
        self.sending = Some(sending);
    }

    pub(super) fn set_waiting(&mut self, waiting: bool) {
        if self.waiting != waiting {
            self.waiting = waiting;
            if waiting {
                self.shared.stalled.fetch_add(1, Ordering::Relaxed);
            } else {
                self.shared.stalled.fetch_sub(1, Ordering::Relaxed);
            }
            if let Some(s) = &self.sending {
                s.waiting.store(waiting, Ordering::Relaxed);
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
