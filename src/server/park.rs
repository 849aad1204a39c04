//! Released client connections, parked without a task each.
//!
//! A keep-alive connection idle for `server.idle_release` gives back its session (hyper's
//! buffers, the gate, the connection state). What is left is a socket waiting for the next
//! request. Kept as a task per connection that was still a few hundred bytes of future, a
//! timer entry and an I/O registration, all scattered among the freed sessions' pages, so
//! glibc could not hand those pages back (workload 7: ~5 KiB per idle connection after a
//! trim). Here a parked connection is one [`Slot`] in a vector, one entry in a deadline heap
//! and one registration in an epoll set of its own, watched by one task (`park_task::run`):
//! - readable (the next request, or the client's close): the socket is taken out of the set
//!   and a new connection task starts a session on it;
//! - `idle_timeout` over: closed, counted in `client_idle_closed`;
//! - shutdown: every released connection is closed at once; a new one that has not spoken yet
//!   is resumed, and its first request answered with `Connection: close` (`Parking::shut`).
//!
//! A new connection that has not sent a byte when it is accepted waits here too, from the
//! start (a connection flood that never speaks costs a slot each, not a session): readable →
//! its first session starts, with `header_read_timeout` still counted from the accept;
//! deadline (`header_read_timeout`) over → closed, counted in `client_header_timeout`.
//!
//! The lot is bounded by `server.max_connections`: a parked connection keeps its place in the
//! open-connection count ([`OpenConn`] travels with it).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use mio::unix::SourceFd;
use mio::{Interest, Poll, Registry, Token};
use tokio::sync::Notify;

use super::open::OpenConn;
use super::tls_conn::TlsStart;
use crate::proxy::{Proxied, SessionTimeouts};

/// The parked connections and the epoll set that watches them. Shared by every connection
/// task (which parks) and the lot's own task (which resumes, expires and shuts down).
pub(crate) struct Parking {
    /// Adds and removes sockets (a handle on the same epoll set that `park_task::run` polls).
    registry: Registry,
    /// Taken by `park_task::run` when it starts; `None` afterwards.
    pub(super) poll: Mutex<Option<Poll>>,
    lot: Mutex<Lot>,
    /// A connection was parked with a deadline earlier than any before it.
    pub(super) earlier: Notify,
}

#[derive(Default)]
pub(super) struct Lot {
    slots: Vec<Slot>,
    /// Indexes of empty slots.
    free: Vec<u32>,
    /// (deadline ms, slot, generation), earliest first. An entry whose slot was emptied or
    /// reused since (another generation) is skipped; rebuilt when such entries pile up.
    deadlines: BinaryHeap<Reverse<(u64, u32, u32)>>,
    parked: usize,
    /// Set at shutdown: nothing is parked any more.
    closed: bool,
}

#[derive(Default)]
struct Slot {
    /// Bumped each time the slot is emptied: tells a stale event or deadline from the slot's
    /// current connection.
    generation: u32,
    conn: Option<Parked>,
}

/// A released connection: its socket (out of Tokio's reactor, in the lot's epoll set), the
/// client's address and its open-connection count.
pub(super) struct Parked {
    pub(super) stream: std::net::TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) open: Carried,
    pub(super) deadline: u64,
    /// A new connection that has sent nothing yet (its `deadline` is its accept time plus
    /// `header_read_timeout`), not a released keep-alive one. A flag rather than the accept
    /// time: a slot stays 72 bytes.
    pub(super) new: bool,
    /// A new connection on a listener that accepts h2c (`[http2] h2c`).
    pub(super) h2c: bool,
}

impl Parked {
    /// The gauge this connection is counted in while parked.
    fn gauge(&self) -> &std::sync::atomic::AtomicU64 {
        let shared = &self.open.conn().0;
        if self.new {
            &shared.waiting_conns
        } else {
            &shared.released_conns
        }
    }
}

/// The open-connection count a parked connection carries. Unwrapped from its `Arc` when the
/// connection task held the only reference (always, unless a tunnel shares it, which a
/// released connection never has): a small allocation made at accept and kept for the whole
/// idle time would pin a page among the freed session's (measured: 3.0 KiB per idle
/// connection with it, see bench/RESULTS.md). A TLS connection also carries its TLS state,
/// and a connection VCL set `sess.*` timeouts for carries them, for its next session (boxed
/// with the count: a slot stays 72 bytes).
pub(super) enum Carried {
    Count(OpenConn),
    Shared(Arc<OpenConn>),
    Tls(Box<(Arc<OpenConn>, TlsStart)>),
    Kept(Box<Kept>),
}

/// What a connection carries beyond its count and TLS state: the `sess.*` timeouts VCL set,
/// what its PROXY protocol header said.
pub(super) type Kept = (
    Arc<OpenConn>,
    Option<TlsStart>,
    Option<SessionTimeouts>,
    Option<Box<Proxied>>,
);

impl Carried {
    fn new(
        open: Arc<OpenConn>,
        tls: Option<TlsStart>,
        kept: Option<SessionTimeouts>,
        proxied: Option<Box<Proxied>>,
    ) -> Carried {
        if kept.is_some() || proxied.is_some() {
            return Carried::Kept(Box::new((open, tls, kept, proxied)));
        }
        if let Some(tls) = tls {
            return Carried::Tls(Box::new((open, tls)));
        }
        match Arc::try_unwrap(open) {
            Ok(count) => Carried::Count(count),
            Err(shared) => Carried::Shared(shared),
        }
    }

    fn conn(&self) -> &OpenConn {
        match self {
            Carried::Count(c) => c,
            Carried::Shared(s) => s,
            Carried::Tls(b) => &b.0,
            Carried::Kept(b) => &b.0,
        }
    }

    /// The count, the TLS state, the `sess.*` timeouts VCL set and what the PROXY protocol
    /// header said, for the next session.
    pub(super) fn into_parts(self) -> Kept {
        match self {
            Carried::Count(c) => (Arc::new(c), None, None, None),
            Carried::Shared(s) => (s, None, None, None),
            Carried::Tls(b) => (b.0, Some(b.1), None, None),
            Carried::Kept(b) => *b,
        }
    }

    /// A new TLS connection that has not started its handshake.
    pub(super) fn handshake_pending(&self) -> bool {
        matches!(self, Carried::Tls(b) if matches!(b.1, TlsStart::Handshake(_)))
    }
}

/// A token carries the slot and its generation (31 bits: never `usize::MAX`).
fn token(slot: u32, generation: u32) -> Token {
    Token(((generation as usize & 0x7fff_ffff) << 32) | slot as usize)
}

pub(super) fn untoken(token: Token) -> (u32, u32) {
    (token.0 as u32, (token.0 >> 32) as u32)
}

impl Parking {
    pub(crate) fn new() -> io::Result<Arc<Parking>> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        Ok(Arc::new(Parking {
            registry,
            poll: Mutex::new(Some(poll)),
            lot: Mutex::new(Lot::default()),
            earlier: Notify::new(),
        }))
    }

    pub(super) fn lot(&self) -> MutexGuard<'_, Lot> {
        // Nothing here panics while holding the lock; a poisoned lock still holds a
        // consistent lot.
        self.lot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks a released connection (`new_since: None`) or a new one that has sent nothing
    /// yet (`Some(accepted at)`) until it is readable, `deadline` (on `clock::now_ms`'s clock)
    /// passes, or shutdown; a TLS connection with its TLS state (`tls`: the listener whose
    /// handshake it waits for, or the established session); `h2c`: a new one on a listener that
    /// accepts h2c. Counted in the released (or
    /// waiting) gauge while parked. A connection that cannot be parked (after shutdown, or
    /// the epoll set refuses it) is closed: `false`.
    // Each argument is a separate fact about the connection that the slot keeps.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn park(
        &self,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        open: Arc<OpenConn>,
        deadline: u64,
        new_since: Option<u64>,
        tls: Option<TlsStart>,
        h2c: bool,
    ) -> bool {
        self.park_carried(
            stream,
            peer,
            Carried::new(open, tls, None, None),
            deadline,
            new_since,
            h2c,
        )
    }

    /// Parks a released keep-alive connection with the `sess.*` timeouts VCL set for it
    /// (`kept`), which its next session starts with (`deadline`: the end of its idle time,
    /// `sess.timeout_idle`'s if set), and what its PROXY protocol header said (`proxied`).
    // Each argument is a separate fact about the connection that the slot keeps.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn park_kept(
        &self,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        open: Arc<OpenConn>,
        deadline: u64,
        tls: Option<TlsStart>,
        kept: Option<SessionTimeouts>,
        proxied: Option<Box<Proxied>>,
    ) -> bool {
        self.park_carried(
            stream,
            peer,
            Carried::new(open, tls, kept, proxied),
            deadline,
            None,
            false,
        )
    }

    fn park_carried(
        &self,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        open: Carried,
        deadline: u64,
        new_since: Option<u64>,
        h2c: bool,
    ) -> bool {
        let Ok(stream) = stream.into_std() else {
            return false;
        };
        let mut lot = self.lot();
        if lot.closed {
            return false;
        }
        let index = match lot.free.pop() {
            Some(i) => i,
            None => {
                lot.slots.push(Slot::default());
                (lot.slots.len() - 1) as u32
            }
        };
        let generation = lot.slots[index as usize].generation;
        let fd = stream.as_raw_fd();
        if let Err(e) = self.registry.register(
            &mut SourceFd(&fd),
            token(index, generation),
            Interest::READABLE,
        ) {
            lot.free.push(index);
            tracing::warn!(%peer, error = %e, "cannot park a released connection; closing it");
            return false;
        }
        let earliest = lot.deadlines.peek().map(|Reverse((d, _, _))| *d);
        // Counted under the lock: the lot's task (which decrements it in `take`, also under the
        // lock) may see the socket readable as soon as it is registered; counting after the
        // unlock could let the gauge dip below zero (it is unsigned) for a moment.
        let parked = Parked {
            stream,
            peer,
            open,
            deadline,
            new: new_since.is_some(),
            h2c: h2c && new_since.is_some(),
        };
        parked.gauge().fetch_add(1, Ordering::Relaxed);
        lot.slots[index as usize].conn = Some(parked);
        lot.deadlines.push(Reverse((deadline, index, generation)));
        lot.parked += 1;
        drop(lot);
        if earliest.is_none_or(|e| deadline < e) {
            self.earlier.notify_one();
        }
        true
    }

    /// Takes the connection out of `slot` if it is still the one of `generation`.
    pub(super) fn take(&self, lot: &mut Lot, slot: u32, generation: u32) -> Option<Parked> {
        let s = lot.slots.get_mut(slot as usize)?;
        if s.generation != generation {
            return None;
        }
        let parked = s.conn.take()?;
        s.generation = s.generation.wrapping_add(1);
        lot.free.push(slot);
        lot.parked -= 1;
        let fd = parked.stream.as_raw_fd();
        // Closing the socket would remove it too, but a resumed socket lives on in Tokio's
        // reactor and must not stay in this set.
        let _ = self.registry.deregister(&mut SourceFd(&fd));
        parked.gauge().fetch_sub(1, Ordering::Relaxed);
        if lot.parked == 0 {
            // Every remaining heap entry is stale: start afresh and give back what a burst
            // of parked connections grew.
            lot.slots.clear();
            lot.free.clear();
            lot.deadlines.clear();
            if lot.slots.capacity() > 1024 {
                lot.slots.shrink_to_fit();
                lot.free.shrink_to_fit();
                lot.deadlines.shrink_to_fit();
            }
        } else if lot.deadlines.len() > 2 * lot.parked + 1024 {
            // Resumed connections leave their deadlines behind: keep the heap near the
            // number of parked connections.
            lot.deadlines = lot
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let c = s.conn.as_ref()?;
                    Some(Reverse((c.deadline, i as u32, s.generation)))
                })
                .collect();
        }
        Some(parked)
    }

    /// Connections whose deadline is at or before `now`, taken out of the lot.
    pub(super) fn expired(&self, now: u64) -> Vec<Parked> {
        let mut lot = self.lot();
        let mut out = Vec::new();
        while let Some(&Reverse((deadline, slot, generation))) = lot.deadlines.peek() {
            if deadline > now {
                break;
            }
            lot.deadlines.pop();
            if let Some(p) = self.take(&mut lot, slot, generation) {
                out.push(p);
            }
        }
        out
    }

    /// The earliest deadline of a parked connection, if any.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        let mut lot = self.lot();
        // Drop stale entries at the top so the task does not wake for them.
        while let Some(&Reverse((_, slot, generation))) = lot.deadlines.peek() {
            let current = lot
                .slots
                .get(slot as usize)
                .is_some_and(|s| s.generation == generation && s.conn.is_some());
            if current {
                break;
            }
            lot.deadlines.pop();
        }
        lot.deadlines.peek().map(|Reverse((d, _, _))| *d)
    }

    /// Closes every parked connection and refuses new ones.
    /// Shutdown: nothing is parked any more. The released keep-alive connections are closed
    /// (between requests, as hyper's graceful shutdown closes an idle one); the new ones that
    /// have not sent their first request are returned, to be resumed and answered within
    /// `header_read_timeout` (`ConnState::on_stop`): such a client may have its request on
    /// the way, and a close would lose it.
    pub(super) fn shut(&self) -> Vec<Parked> {
        let mut lot = self.lot();
        lot.closed = true;
        let mut new = Vec::new();
        for slot in 0..lot.slots.len() as u32 {
            let generation = lot.slots[slot as usize].generation;
            if let Some(p) = self.take(&mut lot, slot, generation)
                && p.new
            {
                new.push(p);
            }
            if lot.slots.is_empty() {
                break;
            }
        }
        new
    }

    /// Closes every parked connection, new ones too, and refuses newcomers (the lot's epoll
    /// set failed: nothing would wake them). Returns how many were closed.
    pub(super) fn close_all(&self) -> usize {
        let mut lot = self.lot();
        lot.closed = true;
        let mut closed = 0;
        for slot in 0..lot.slots.len() as u32 {
            let generation = lot.slots[slot as usize].generation;
            if self.take(&mut lot, slot, generation).is_some() {
                closed += 1;
            }
            if lot.slots.is_empty() {
                break;
            }
        }
        closed
    }

    /// How many connections are parked.
    #[cfg(test)]
    fn parked(&self) -> usize {
        self.lot().parked
    }
}

#[cfg(test)]
mod tests;
