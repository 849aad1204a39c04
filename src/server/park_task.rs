//! The parking lot's task ([`run`]): one task watches the lot's epoll set, resumes a parked
//! connection when it becomes readable (a new connection task starts its session), closes
//! those past their deadline; at shutdown it closes the released ones and resumes the new
//! ones that have not spoken yet (`Parking::shut`; `park.rs` is the lot).

use std::sync::Arc;
use std::time::Duration;

use mio::Events;
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

use super::client::client_connection;
use super::park::{Parked, Parking, untoken};
use super::tls_conn::TlsStart;
use crate::clock::now_ms;
use crate::reload::Live;

/// Events taken from the lot's epoll set per system call.
const EVENTS: usize = 256;

/// The lot's task: resumes connections that became readable (a new connection task each),
/// closes those past their deadline; at shutdown closes the released ones and resumes the new
/// ones, whose first request is answered.
pub(super) async fn run(
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
            for p in parking.shut() {
                resume(p, &parking, &live, &shutdown);
            }
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
    let (open, tls, kept, proxied) = open.into_parts();
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
            tokio::spawn(client_connection(
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
                kept,
                proxied,
            ));
        }
        Err(e) => tracing::debug!(%peer, error = %e, "cannot resume a parked connection"),
    }
}
