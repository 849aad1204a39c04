//! The accept loop every client listener runs ([`accept_loop`], one loop generic over the
//! [`Listener`]): each connection is counted, refused at `server.max_connections`, then
//! served the listener's way; a failed accept (EMFILE and friends) backs off instead of
//! spinning. A TCP listener ([`Tcp`]) tunes the socket, reads a PROXY protocol header, parks a
//! connection that has sent nothing yet or starts its session; Unix sockets are `unix.rs`.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::client::{Accepted, behind_proxy, client_connection};
use super::open::{OpenConn, ms};
use super::tls_conn::TlsStart;
use super::{local, near, park, proxy_header, refuse};
use crate::clock::now_ms;
use crate::proxy::Proxy;
use crate::reload::Live;

/// A kind of client listener, as the accept loop sees it.
pub(super) trait Listener {
    /// An accepted connection.
    type Conn;

    /// What the log says when an accept fails.
    const ACCEPT_FAILED: &'static str;

    /// The next connection, and its client's address.
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Conn, SocketAddr)>> + Send;

    /// A connection over `server.max_connections` (no longer counted open).
    fn refuse(&self, conn: Self::Conn, peer: SocketAddr, proxy: &Proxy);

    /// Serves a connection counted open (`Process::open_conns`): what serves it holds an
    /// [`OpenConn`], or gives the place back when it drops the connection at once.
    fn serve(
        &self,
        conn: Self::Conn,
        peer: SocketAddr,
        proxy: &Proxy,
        live: &Arc<Live>,
        shutdown: &watch::Receiver<bool>,
    );
}

/// Accepts connections on `listener` until shutdown. Connection settings come from the
/// configuration current at each accept.
pub(super) async fn accept_loop<L: Listener>(
    listener: L,
    live: Arc<Live>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((conn, peer)) => {
                let proxy = live.load();
                proxy.counters.client_conn.inc();
                proxy.session_begins();
                let max_conns = proxy.config.server.max_connections as u64;
                let open = proxy.shared.open_conns.fetch_add(1, Ordering::Relaxed);
                if max_conns > 0 && open >= max_conns {
                    proxy.shared.open_conns.fetch_sub(1, Ordering::Relaxed);
                    listener.refuse(conn, peer, &proxy);
                    continue;
                }
                listener.serve(conn, peer, &proxy, &live, &shutdown);
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                live.load().counters.client_accept_error.inc();
                tracing::warn!(error = %e, "{}", L::ACCEPT_FAILED);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A TCP client listener, configured as `configured`; `tls`: the `[[tls]]` listener it
/// belongs to (its certificates and settings are those current at each accept).
pub(super) struct Tcp {
    listener: TcpListener,
    configured: SocketAddr,
    parking: Arc<park::Parking>,
    tls: Option<Arc<str>>,
    lingering: refuse::Lingering,
    /// Every connection's local address when the listener is bound to one IP (VCL's
    /// `server.ip`): known once here, not asked of each socket.
    bound: Option<SocketAddr>,
}

impl Tcp {
    pub(super) fn new(
        listener: TcpListener,
        configured: SocketAddr,
        parking: Arc<park::Parking>,
        tls: Option<Arc<str>>,
    ) -> Tcp {
        let bound = local::specific(listener.local_addr().ok());
        Tcp {
            listener,
            configured,
            parking,
            tls,
            lingering: refuse::Lingering::default(),
            bound,
        }
    }
}

impl Listener for Tcp {
    type Conn = TcpStream;

    const ACCEPT_FAILED: &'static str = "accept failed";

    async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        self.listener.accept().await
    }

    fn refuse(&self, stream: TcpStream, peer: SocketAddr, proxy: &Proxy) {
        refuse::refuse(stream, peer, proxy, &self.lingering);
    }

    fn serve(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        proxy: &Proxy,
        live: &Arc<Live>,
        shutdown: &watch::Receiver<bool>,
    ) {
        let tls = match &self.tls {
            None => None,
            Some(name) => match live.tls().get(name) {
                Some(frontend) => Some(TlsStart::Handshake(frontend)),
                // Removed by a reload that has not stopped this loop yet.
                None => {
                    proxy.shared.open_conns.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            },
        };
        // A client a short round trip away gets a send buffer that keeps large
        // responses warm in the caches (server/near.rs).
        let server = &proxy.config.server;
        if near::tune(&stream, server.near_send_buffer.0, server.near_rtt.0) {
            proxy.counters.client_conn_near.inc();
        }
        // `[http2] h2c` for this listener, as configured at accept time.
        let h2c = tls.is_none() && proxy.config.http2.h2c.on(self.configured);
        // Behind a load balancer: the PROXY protocol header first, read by a task of
        // its own; the session then starts with the client address it names.
        if server.proxy_protocol.on(self.configured) {
            if !crate::config::proxy_protocol::trusted(&server.proxy_protocol_from, peer.ip()) {
                proxy_header::Refused::Untrusted.count(&proxy.counters);
                proxy.shared.open_conns.fetch_sub(1, Ordering::Relaxed);
                return;
            }
            let _ = stream.set_nodelay(server.tcp_nodelay);
            let open = Arc::new(OpenConn(proxy.shared.clone()));
            let conn = Accepted {
                live: live.clone(),
                parking: self.parking.clone(),
                shutdown: shutdown.clone(),
                open,
                since: now_ms(),
                tls,
                h2c,
                bound: self.bound,
            };
            tokio::spawn(behind_proxy(stream, peer, conn));
            return;
        }
        // A connection that has not sent a byte yet waits as a socket alone (no task,
        // no session) until it does or `header_read_timeout` passes: a flood of silent
        // connections costs a parking slot each, not ~11.5 KiB.
        if !has_bytes(&stream) {
            let _ = stream.set_nodelay(proxy.config.server.tcp_nodelay);
            let now = now_ms();
            let wait = match &tls {
                Some(TlsStart::Handshake(f)) => f.handshake_timeout,
                _ => proxy.config.server.header_read_timeout.0,
            };
            let deadline = now.saturating_add(ms(wait));
            let open = Arc::new(OpenConn(proxy.shared.clone()));
            self.parking
                .park(stream, peer, open, deadline, Some(now), tls, h2c);
            return;
        }
        tokio::spawn(client_connection(
            stream,
            peer,
            live.clone(),
            self.parking.clone(),
            shutdown.clone(),
            None,
            None,
            tls,
            h2c,
            self.bound,
            None,
            None,
        ));
    }
}

/// Whether the client has sent anything yet (or closed): a non-blocking peek of one byte.
/// An error other than "nothing yet" counts as something, for the session to see.
fn has_bytes(stream: &TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    match socket2::SockRef::from(stream).peek(&mut byte) {
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        Ok(_) => true,
    }
}
