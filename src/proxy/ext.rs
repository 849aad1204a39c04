//! What the client session and the request path hand each other with a request or a response
//! (as `http` extensions): VCL's `sess.*` timeouts ([`SessionTimeouts`]), the local address
//! ([`LocalAddr`]) and the listener ([`Listener`]) a request came in on; and what the policy
//! tells the fetch about the backend connection ([`BackendClose`]).

use std::time::Duration;

/// VCL's per-session timeouts, as a request and response extension between the client
/// session (`server/h1`, `server/h2`) and the VCL program: on a request, the timeouts earlier
/// responses set for the session; on a response, the timeouts the session keeps from then on.
/// Each `None`: the configured one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SessionTimeouts {
    /// `sess.timeout_idle`: `server.idle_timeout`.
    pub idle: Option<Duration>,
    /// `sess.timeout_linger`: `server.idle_release` (0: the session keeps its state).
    pub linger: Option<Duration>,
    /// `sess.send_timeout`: `server.send_total_timeout` (0: no limit).
    pub send: Option<Duration>,
    /// `sess.idle_send_timeout`: `server.send_timeout`.
    pub idle_send: Option<Duration>,
}

impl SessionTimeouts {
    /// In [`crate::vcl::run::SessTimeout`]'s order: idle, linger, send, idle send.
    pub fn get(&self, i: usize) -> Option<Duration> {
        [self.idle, self.linger, self.send, self.idle_send]
            .get(i)
            .copied()
            .flatten()
    }

    /// Sets the timeout at `i` (same order as [`SessionTimeouts::get`]).
    pub fn set(&mut self, i: usize, value: Option<Duration>) {
        match i {
            0 => self.idle = value,
            1 => self.linger = value,
            2 => self.send = value,
            _ => self.idle_send = value,
        }
    }

    /// Whether any is set.
    pub fn any(&self) -> bool {
        *self != SessionTimeouts::default()
    }

    /// The timeouts the session keeps after a response whose request set some (`set`, as
    /// [`crate::vcl::run::State::sess`] holds them): `current` (what the request came with)
    /// with the request's changes; `None` when it set none.
    pub fn after(
        current: Option<&SessionTimeouts>,
        set: &[Option<Option<f64>>; 4],
    ) -> Option<SessionTimeouts> {
        if set.iter().all(Option::is_none) {
            return None;
        }
        let mut t = current.copied().unwrap_or_default();
        for (i, change) in set.iter().enumerate() {
            if let Some(secs) = change {
                t.set(i, secs.map(crate::vcl::run::value::to_duration));
            }
        }
        Some(t)
    }
}

/// The policy's word that the backend connection a response came on serves no other request
/// (VCL's `beresp.http.connection` saying `close`), as a response extension from the policy
/// to the fetch (`fetch/exchange.rs`), which keeps that connection out of the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendClose;

/// VCL's `server.ip` and `local.ip`: the local address (IP and port) of the socket the
/// client connection was accepted on, as a request extension from the client session
/// (`server/local.rs`), with what a PROXY protocol header said of the connection (`None`:
/// no header, or one that named no addresses). Attached only when the loaded VCL program
/// reads them ([`Proxy::reads_local`]); a request without it reads `0.0.0.0:0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalAddr(pub std::net::SocketAddr, pub Option<Proxied>);

/// A connection that came through a balancer's PROXY protocol header naming addresses:
/// VCL's `remote.ip` is the balancer's end of the TCP connection (`client.ip` the client the
/// header names), `server.ip` the address the client connected to on the balancer (the
/// header's destination; `local.ip` stays this socket's), as in Varnish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proxied {
    pub remote: std::net::SocketAddr,
    pub server: std::net::SocketAddr,
}

/// The client listener a request came in on, as configured (`server.listen` or a `[[tls]]`'s
/// `listen` address as written), as a request extension from the client session: attached
/// only when the configuration has `[[site]]`s ([`Proxy::has_sites`]), which are chosen by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listener(pub std::net::SocketAddr);
