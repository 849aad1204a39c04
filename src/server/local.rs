//! A client connection's local address for VCL (`server.ip`, `local.ip`): the listener's own
//! bound address when it is bound to one IP, else asked of the socket (getsockname) the first
//! time a request of the session needs it — and only a VCL program that reads those variables
//! makes one need it. A connection behind a PROXY protocol header also carries what the header
//! said (`remote.ip` is then the balancer, `server.ip` the header's destination).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::OnceLock;

use hyper::Request;

use crate::proxy::{Listener, LocalAddr, Proxied, Proxy};
use crate::reload::Live;

/// One session's local address, found at most once.
pub(crate) struct ConnLocal {
    /// The connection's socket, open for as long as the session that holds this runs.
    fd: RawFd,
    addr: OnceLock<SocketAddr>,
    /// The listener it was accepted on, as configured (for `[[site]]`s).
    listener: OnceLock<Option<SocketAddr>>,
    /// What the connection's PROXY protocol header said of it (VCL's `remote.ip`,
    /// `server.ip`), when it named addresses.
    proxied: Option<Box<Proxied>>,
}

impl ConnLocal {
    /// `bound`: the listener's address when it is bound to one IP (no system call needed);
    /// `None` for a wildcard listener or a connection resumed from the parking lot.
    pub(crate) fn new(stream: &impl AsRawFd, bound: Option<SocketAddr>) -> ConnLocal {
        let addr = OnceLock::new();
        if let Some(a) = bound {
            let _ = addr.set(a);
        }
        ConnLocal {
            fd: stream.as_raw_fd(),
            addr,
            listener: OnceLock::new(),
            proxied: None,
        }
    }

    /// The same, for a connection whose PROXY protocol header said `proxied`.
    pub(crate) fn proxied(mut self, proxied: Option<Box<Proxied>>) -> ConnLocal {
        self.proxied = proxied;
        self
    }

    /// A connection on the `i`th socket of `server.listen_unix`: its listener is that
    /// socket's `config::site::unix_listener`, its local address none (`0.0.0.0`).
    pub(crate) fn unix(stream: &impl AsRawFd, i: usize) -> ConnLocal {
        let local = ConnLocal::new(stream, Some(SocketAddr::from(([0, 0, 0, 0], 0))));
        let _ = local
            .listener
            .set(Some(crate::config::site::unix_listener(i)));
        local
    }

    /// The same socket's facts, found again by whoever holds this one (the fast-hit path).
    pub(crate) fn another(&self) -> ConnLocal {
        let addr = OnceLock::new();
        if let Some(a) = self.addr.get() {
            let _ = addr.set(*a);
        }
        let listener = OnceLock::new();
        if let Some(l) = self.listener.get() {
            let _ = listener.set(*l);
        }
        ConnLocal {
            fd: self.fd,
            addr,
            listener,
            proxied: self.proxied.clone(),
        }
    }

    /// The listener the connection was accepted on, as configured: found once per session
    /// (the local address, then the live listener list), and only when sites ask for it.
    pub(crate) fn listener(&self, live: &Live) -> Option<SocketAddr> {
        *self
            .listener
            .get_or_init(|| live.configured_for(self.get()))
    }

    /// The address, asked of the socket the first time. Called only from the session's
    /// service while it handles a request, when the connection (and so `fd`) is open.
    fn get(&self) -> SocketAddr {
        *self.addr.get_or_init(|| {
            // SAFETY: the session owns the socket and outlives every call of its service,
            // so `fd` is open and still this connection's while the borrow lasts.
            let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
            socket2::SockRef::from(&fd)
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                // Not a socket address (never for TCP): as Varnish reads a Unix socket's.
                .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)))
        })
    }

    /// Gives `req` the local address when `proxy`'s VCL program reads it or hashes it (the
    /// built-in vcl_hash of a request without `Host`), and the listener when `proxy` has
    /// `[[site]]`s.
    pub(crate) fn attach<B>(&self, proxy: &Proxy, live: &Live, req: &mut Request<B>) {
        if proxy.reads_local()
            || (proxy.vcl.is_some() && !req.headers().contains_key(http::header::HOST))
        {
            req.extensions_mut()
                .insert(LocalAddr(self.get(), self.proxied.as_deref().copied()));
        }
        if proxy.has_sites()
            && let Some(l) = self.listener(live)
        {
            req.extensions_mut().insert(Listener(l));
        }
    }
}

/// A listener's address as a connection's local address: known only when it names one IP.
pub(crate) fn specific(bound: Option<SocketAddr>) -> Option<SocketAddr> {
    bound.filter(|a| !a.ip().is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_address_is_asked_of_the_socket() {
        assert_eq!(specific(Some(SocketAddr::from(([0, 0, 0, 0], 80)))), None);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (server, _) = listener.accept().unwrap();
        let local = ConnLocal::new(&server, None);
        assert_eq!(local.get(), SocketAddr::from(([127, 0, 0, 1], port)));
        drop(client);
    }

    #[test]
    fn a_specific_listener_is_its_own_address() {
        let bound = SocketAddr::from(([127, 0, 0, 1], 8080));
        assert_eq!(specific(Some(bound)), Some(bound));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // The bound address wins without asking the socket.
        let local = ConnLocal::new(&listener, Some(bound));
        assert_eq!(local.get(), bound);
    }
}
