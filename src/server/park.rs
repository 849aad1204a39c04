//! Released client connections, parked without a task each.
//!
//! A keep-alive connection idle for `server.idle_release` gives back its session (hyper's
//! buffers, the gate, the connection state). What is left is a socket waiting for the next
//! request. Kept as a task per connection that was still a few hundred bytes of future, a
//! timer entry and an I/O registration, all scattered among the freed sessions' pages, so
//! glibc could not hand those pages back (workload 7: ~5 KiB per idle connection after a
//! trim). Here a parked connection is one [`Slot`] in a vector, one entry in a deadline heap
//! and one registration in an epoll set of its own, watched by one task ([`run`]):
//! - readable (the next request, or the client's close): the socket is taken out of the set
//!   and a new connection task starts a session on it;
//! - `idle_timeout` over: closed, counted in `client_idle_closed`;
//! - shutdown: every parked connection is closed at once.
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
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};
use tokio::io::unix::AsyncFd;
use tokio::sync::{Notify, watch};

use super::OpenConn;
use super::tls_conn::TlsStart;
use crate::clock::now_ms;
use crate::reload::Live;

/// Events taken from the lot's epoll set per system call.
const EVENTS: usize = 256;

/// The parked connections and the epoll set that watches them. Shared by every connection
/// task (which parks) and the lot's own task (which resumes, expires and shuts down).
pub(crate) struct Parking {
    /// Adds and removes sockets (a handle on the same epoll set that [`run`] polls).
    registry: Registry,
    /// Taken by [`run`] when it starts; `None` afterwards.
    poll: Mutex<Option<Poll>>,
    lot: Mutex<Lot>,
    /// A connection was parked with a deadline earlier than any before it.
    earlier: Notify,
}

#[derive(Default)]
struct Lot {
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
struct Parked {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    open: Carried,
    deadline: u64,
    /// A new connection that has sent nothing yet (its `deadline` is its accept time plus
    /// `header_read_timeout`), not a released keep-alive one. A flag rather than the accept
    /// time: a slot stays 72 bytes.
    new: bool,
    /// A new connection on a listener that accepts h2c (`[http2] h2c`).
    h2c: bool,
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
/// connection with it, see bench/RESULTS.md). A TLS connection also carries its TLS state
/// (boxed with the count: a slot stays 72 bytes).
enum Carried {
    Count(OpenConn),
    Shared(Arc<OpenConn>),
    Tls(Box<(Arc<OpenConn>, TlsStart)>),
}

impl Carried {
    fn new(open: Arc<OpenConn>, tls: Option<TlsStart>) -> Carried {
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
        }
    }

    fn into_parts(self) -> (Arc<OpenConn>, Option<TlsStart>) {
        match self {
            Carried::Count(c) => (Arc::new(c), None),
            Carried::Shared(s) => (s, None),
            Carried::Tls(b) => (b.0, Some(b.1)),
        }
    }

    /// A new TLS connection that has not started its handshake.
    fn handshake_pending(&self) -> bool {
        matches!(self, Carried::Tls(b) if matches!(b.1, TlsStart::Handshake(_)))
    }
}

/// A token carries the slot and its generation (31 bits: never `usize::MAX`).
fn token(slot: u32, generation: u32) -> Token {
    Token(((generation as usize & 0x7fff_ffff) << 32) | slot as usize)
}

fn untoken(token: Token) -> (u32, u32) {
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

    fn lot(&self) -> MutexGuard<'_, Lot> {
        // Nothing here panics while holding the lock; a poisoned lock still holds a
        // consistent lot.
        self.lot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks a released connection (`new_since: None`) or a new one that has sent nothing
    /// yet (`Some(accepted at)`) until it is readable, `deadline` (on [`now_ms`]'s clock)
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
        let Ok(stream) = stream.into_std() else {
            return false;
        };
        let open = Carried::new(open, tls);
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
    fn take(&self, lot: &mut Lot, slot: u32, generation: u32) -> Option<Parked> {
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
    fn expired(&self, now: u64) -> Vec<Parked> {
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
    fn next_deadline(&self) -> Option<u64> {
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
    fn close_all(&self) -> usize {
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

/// The lot's task: resumes connections that became readable (a new connection task each),
/// closes those past their deadline, and closes all of them at shutdown.
pub(crate) async fn run(
    parking: Arc<Parking>,
    live: Arc<Live>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Some(poll) = parking
        .poll
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    else {
        return;
    };
    // SAFETY: a mio `Poll` owns its epoll descriptor and returns that same descriptor from
    // `as_raw_fd` until it is dropped, which only the `AsyncFd` does (it is moved in here;
    // below it is only polled through `get_inner_mut`, never replaced or closed; the
    // registry handle `Parking` keeps is a `dup` of its own).
    let registered =
        unsafe { AsyncFd::register_with_interest(poll, tokio::io::Interest::READABLE) };
    let mut poll = match registered {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch parked connections; they are closed instead");
            parking.close_all();
            return;
        }
    };
    let mut events = Events::with_capacity(EVENTS);
    loop {
        if *shutdown.borrow() {
            parking.close_all();
            return;
        }
        let sleep = parking.next_deadline().map(|d| {
            let wait = Duration::from_millis(d.saturating_sub(now_ms()));
            tokio::time::sleep(wait)
        });
        tokio::select! {
            ready = poll.readable_mut() => {
                let Ok(mut ready) = ready else {
                    tracing::error!("parked connections' epoll set failed; they are closed instead");
                    parking.close_all();
                    return;
                };
                let mut resumed = Vec::new();
                loop {
                    let polled = ready.get_inner_mut().poll(&mut events, Some(Duration::ZERO));
                    if polled.is_err() || events.is_empty() {
                        // Drained: wait for the next edge on the lot's epoll set.
                        ready.clear_ready();
                        break;
                    }
                    let mut lot = parking.lot();
                    for event in events.iter() {
                        let (slot, generation) = untoken(event.token());
                        resumed.extend(parking.take(&mut lot, slot, generation));
                    }
                }
                for p in resumed {
                    resume(p, &parking, &live, &shutdown);
                }
            }
            _ = until(sleep) => {
                let expired = parking.expired(now_ms());
                let handshakes = expired.iter().filter(|p| p.open.handshake_pending()).count() as u64;
                let new = expired.iter().filter(|p| p.new).count() as u64 - handshakes;
                let counters = &live.load().counters;
                if new > 0 {
                    counters.client_header_timeout.add(new);
                }
                for _ in 0..handshakes {
                    crate::tls::server::Reason::Timeout.count(counters);
                }
                let idle = expired.len() as u64 - new - handshakes;
                if idle > 0 {
                    counters.client_idle_closed.add(idle);
                }
                // Dropping them closes the sockets and their open-connection counts.
            }
            _ = parking.earlier.notified() => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Waits for `sleep`, or forever without one.
async fn until(sleep: Option<tokio::time::Sleep>) {
    match sleep {
        Some(s) => s.await,
        None => std::future::pending().await,
    }
}

/// Back into Tokio's reactor, with a new connection task that starts a session.
fn resume(p: Parked, parking: &Arc<Parking>, live: &Arc<Live>, shutdown: &watch::Receiver<bool>) {
    let Parked {
        stream,
        peer,
        open,
        deadline,
        new,
        h2c,
    } = p;
    let (open, tls) = open.into_parts();
    // A new connection's head is still due `header_read_timeout` after its accept (a TLS
    // one's handshake, `handshake_timeout` after it).
    let new_since = new.then(|| {
        let wait = match &tls {
            Some(TlsStart::Handshake(f)) => f.handshake_timeout,
            _ => live.load().config.server.header_read_timeout.0,
        };
        deadline.saturating_sub(wait.as_millis().min(u64::MAX as u128) as u64)
    });
    match tokio::net::TcpStream::from_std(stream) {
        Ok(stream) => {
            tokio::spawn(super::client_connection(
                stream,
                peer,
                live.clone(),
                parking.clone(),
                shutdown.clone(),
                Some(open),
                new_since,
                tls,
                h2c,
                // The slot keeps no listener: asked of the socket if VCL needs it.
                None,
            ));
        }
        Err(e) => tracing::debug!(%peer, error = %e, "cannot resume a parked connection"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::{Process, Proxy};
    use crate::stats::Counters;

    fn shared() -> Arc<Process> {
        let config = Arc::new(crate::config::Config::embedded_default());
        Proxy::new(
            config,
            crate::vcl::attach::Programs::default(),
            Arc::new(Counters::default()),
        )
        .expect("embedded default config")
        .shared
        .clone()
    }

    /// `n` accepted loopback connections (server side) and their clients.
    async fn connections(n: usize) -> Vec<(tokio::net::TcpStream, tokio::net::TcpStream)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut out = Vec::new();
        for _ in 0..n {
            let client = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            out.push((server, client));
        }
        out
    }

    /// What a parked connection costs besides its socket (docs: ARCHITECTURE.md invariant).
    #[test]
    fn a_parked_connection_is_one_small_slot() {
        assert!(
            std::mem::size_of::<Slot>() <= 72,
            "{}",
            std::mem::size_of::<Slot>()
        );
    }

    #[test]
    fn tokens_carry_slot_and_generation() {
        for (slot, generation) in [(0, 0), (7, 1), (u32::MAX, 0x7fff_ffff)] {
            assert_eq!(untoken(token(slot, generation)), (slot, generation));
        }
        assert_ne!(token(u32::MAX, u32::MAX).0, usize::MAX);
    }

    #[tokio::test]
    async fn deadlines_expire_in_order_and_resumed_ones_are_skipped() {
        let parking = Parking::new().unwrap();
        let shared = shared();
        let mut clients = Vec::new();
        for (i, (server, client)) in connections(4).await.into_iter().enumerate() {
            let peer = client.local_addr().unwrap();
            let open = Arc::new(OpenConn(shared.clone()));
            shared.open_conns.fetch_add(1, Ordering::Relaxed);
            assert!(parking.park(server, peer, open, 1_000 + i as u64 * 10, None, None, false));
            clients.push(client);
        }
        assert_eq!(parking.parked(), 4);
        assert_eq!(shared.released_conns.load(Ordering::Relaxed), 4);
        assert_eq!(parking.next_deadline(), Some(1_000));
        // The first one is resumed (as if it became readable): its deadline is stale.
        let resumed = {
            let mut lot = parking.lot();
            let generation = lot.slots[0].generation;
            parking.take(&mut lot, 0, generation)
        };
        assert!(resumed.is_some());
        // A second take of the same generation finds nothing.
        assert!(parking.take(&mut parking.lot(), 0, 0).is_none());
        assert_eq!(parking.next_deadline(), Some(1_010));
        drop(resumed);
        assert_eq!(shared.open_conns.load(Ordering::Relaxed), 3);
        let expired = parking.expired(1_015);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].deadline, 1_010);
        drop(expired);
        assert_eq!(parking.parked(), 2);
        assert_eq!(shared.released_conns.load(Ordering::Relaxed), 2);
        assert_eq!(shared.open_conns.load(Ordering::Relaxed), 2);
        // Shutdown closes the rest and refuses newcomers.
        assert_eq!(parking.close_all(), 2);
        assert_eq!(parking.parked(), 0);
        assert_eq!(shared.open_conns.load(Ordering::Relaxed), 0);
        assert_eq!(shared.released_conns.load(Ordering::Relaxed), 0);
        let (server, client) = connections(1).await.pop().unwrap();
        let open = Arc::new(OpenConn(shared.clone()));
        shared.open_conns.fetch_add(1, Ordering::Relaxed);
        assert!(!parking.park(
            server,
            client.local_addr().unwrap(),
            open,
            5,
            None,
            None,
            false
        ));
        assert_eq!(shared.open_conns.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn stale_deadlines_do_not_pile_up() {
        // Many connections parked and resumed while a few stay parked: the heap holds about
        // the parked ones, not one entry per park ever made.
        let parking = Parking::new().unwrap();
        let shared = shared();
        let mut conns = connections(40).await;
        let (keep, client) = conns.pop().unwrap();
        let peer = client.local_addr().unwrap();
        assert!(parking.park(
            keep,
            peer,
            Arc::new(OpenConn(shared.clone())),
            u64::MAX,
            None,
            None,
            false
        ));
        shared.open_conns.fetch_add(1, Ordering::Relaxed);
        let mut pairs: Vec<_> = conns.into_iter().map(|(s, c)| (Some(s), c)).collect();
        for round in 0..100 {
            for (server, client) in pairs.iter_mut() {
                let stream = server.take().unwrap();
                shared.open_conns.fetch_add(1, Ordering::Relaxed);
                let open = Arc::new(OpenConn(shared.clone()));
                assert!(parking.park(
                    stream,
                    client.local_addr().unwrap(),
                    open,
                    round,
                    None,
                    None,
                    false
                ));
            }
            // Resume them all again, the way `run` does.
            let mut lot = parking.lot();
            let parked: Vec<(u32, u32)> = lot
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.conn.as_ref().is_some_and(|c| c.deadline != u64::MAX))
                .map(|(i, s)| (i as u32, s.generation))
                .collect();
            for (slot, generation) in parked {
                let p = parking.take(&mut lot, slot, generation).unwrap();
                let stream = tokio::net::TcpStream::from_std(p.stream).unwrap();
                let i = pairs
                    .iter()
                    .position(|(s, c)| s.is_none() && c.local_addr().unwrap() == p.peer)
                    .unwrap();
                pairs[i].0 = Some(stream);
            }
            assert!(lot.deadlines.len() <= 2 * lot.parked + 1024);
        }
        assert_eq!(parking.parked(), 1);
        assert_eq!(shared.released_conns.load(Ordering::Relaxed), 1);
        assert_eq!(parking.next_deadline(), Some(u64::MAX));
    }
}
