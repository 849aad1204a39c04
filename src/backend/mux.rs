//! HTTP/2 to a backend (`[[backend]] protocol = "h2"`): a few connections shared by every
//! request, each carrying at most `max_streams` requests at once (and no more than the
//! backend's own `SETTINGS_MAX_CONCURRENT_STREAMS`, which hyper's client waits for). A request
//! takes a stream slot on the least busy open connection with one free; when every connection
//! is full, the caller opens another and adds it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use hyper::client::conn::http2::SendRequest;

use super::request_body::RequestBody;

/// One HTTP/2 connection to the backend.
struct H2Conn {
    sender: SendRequest<RequestBody>,
    /// Requests on it now.
    streams: AtomicU32,
}

/// The HTTP/2 connections of one backend.
pub(super) struct Mux {
    conns: Mutex<Vec<Arc<H2Conn>>>,
    max_streams: u32,
    /// Held while a connection is being opened: requests that find every connection full
    /// wait for it instead of each opening its own.
    pub(super) opening: tokio::sync::Mutex<()>,
}

/// What a connection's task sees of its connection: whether requests are on it.
pub(super) struct Busy(std::sync::Weak<H2Conn>);

impl Busy {
    /// Requests on the connection now (0 once the mux dropped it).
    pub(super) fn streams(&self) -> u32 {
        self.0
            .upgrade()
            .map_or(0, |c| c.streams.load(Ordering::Relaxed))
    }
}

/// A stream slot on a connection, given back when dropped (the response body ended).
pub(crate) struct Slot {
    conn: Arc<H2Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conn.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Slot {
    /// The connection's sender (a clone: hyper's HTTP/2 senders are shared handles).
    pub(super) fn sender(&self) -> SendRequest<RequestBody> {
        self.conn.sender.clone()
    }
}

impl Mux {
    pub(super) fn new(max_streams: u32) -> Mux {
        Mux {
            conns: Mutex::new(Vec::new()),
            max_streams: max_streams.max(1),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// A slot on the least busy open connection with room, dropping closed connections;
    /// None when every connection is full (or there is none).
    pub(super) fn take(&self) -> Option<Slot> {
        let mut conns = self.conns.lock().ok()?;
        conns.retain(|c| !c.sender.is_closed());
        let conn = conns
            .iter()
            .filter(|c| c.streams.load(Ordering::Relaxed) < self.max_streams)
            .min_by_key(|c| c.streams.load(Ordering::Relaxed))?
            .clone();
        conn.streams.fetch_add(1, Ordering::Relaxed);
        Some(Slot { conn })
    }

    /// Adds a newly opened connection and takes a slot on it; the [`Busy`] handle tells the
    /// connection's task when it has no request (to close it after `idle_timeout`).
    pub(super) fn add(&self, sender: SendRequest<RequestBody>) -> (Slot, Busy) {
        let conn = Arc::new(H2Conn {
            sender,
            streams: AtomicU32::new(1),
        });
        if let Ok(mut conns) = self.conns.lock() {
            conns.push(conn.clone());
        }
        let busy = Busy(Arc::downgrade(&conn));
        (Slot { conn }, busy)
    }
}
