//! Unix-socket client listeners (`server.listen_unix`, nginx's `listen unix:/path`): a
//! front end on the same machine (a TLS terminator such as hitch, an nginx or HAProxy in
//! front) connects without TCP. The socket file is created with `server.listen_unix_mode`,
//! a stale one (left by a process that is gone) is removed first, one a live process still
//! listens on is an error, and the file is removed when Shellac stops. Connections are served
//! as HTTP/1.1 sessions like TCP ones, kept (not parked) while idle until `idle_timeout`;
//! their client address is `0.0.0.0` (as Varnish gives a Unix-socket client), or the one a
//! PROXY protocol header names when `server.proxy_protocol = true`.

use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use super::accept::Listener;
use super::h1::{Quiet, serve_session};
use super::open::{OpenConn, ms};
use super::proxy_header;
use crate::clock::now_ms;
use crate::proxy::Proxy;
use crate::reload::Live;

impl Quiet for UnixStream {
    fn quiet(&mut self) -> bool {
        true
    }
}

/// The client address of a Unix-socket connection without a PROXY protocol header.
pub(super) const UNIX_CLIENT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// Binds `path` with file mode `mode`: a stale socket file is removed first; a socket another
/// process still accepts on, or a file that is not a socket, is an error.
pub(super) fn bind(path: &Path, mode: u32) -> anyhow::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                anyhow::bail!(
                    "{} is in use: another process accepts on it",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
        }
        Ok(_) => anyhow::bail!("{} exists and is not a socket", path.display()),
        Err(_) => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    Ok(listener)
}

/// Removes the socket files of `paths` (at stop), if they are still sockets.
pub(super) fn remove(paths: &[PathBuf]) {
    for p in paths {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The `index`th socket of `server.listen_unix`, as the accept loop takes connections from
/// it (`accept.rs`).
pub(super) struct Unix {
    pub(super) listener: UnixListener,
    pub(super) index: usize,
}

impl Listener for Unix {
    type Conn = UnixStream;

    const ACCEPT_FAILED: &'static str = "accept failed on a Unix socket";

    async fn accept(&self) -> std::io::Result<(UnixStream, SocketAddr)> {
        self.listener
            .accept()
            .await
            .map(|(stream, _)| (stream, UNIX_CLIENT))
    }

    fn refuse(&self, _stream: UnixStream, _peer: SocketAddr, proxy: &Proxy) {
        proxy.counters.client_conn_refused.inc();
    }

    fn serve(
        &self,
        stream: UnixStream,
        _peer: SocketAddr,
        proxy: &Proxy,
        live: &Arc<Live>,
        shutdown: &watch::Receiver<bool>,
    ) {
        let open = Arc::new(OpenConn(proxy.shared.clone()));
        tokio::spawn(connection(
            stream,
            self.index,
            live.clone(),
            shutdown.clone(),
            open,
        ));
    }
}

/// One Unix-socket client connection: its PROXY protocol header when every listener requires
/// one, then an HTTP/1.1 session that is never released to the parking lot.
async fn connection(
    mut stream: UnixStream,
    index: usize,
    live: Arc<Live>,
    shutdown: watch::Receiver<bool>,
    open: Arc<OpenConn>,
) {
    let since = now_ms();
    let mut cfg = live.load().config.server.clone();
    let mut peer = UNIX_CLIENT;
    let mut proxied = None;
    if cfg.proxy_protocol == crate::config::proxy_protocol::ProxyProtocol::All {
        let deadline = since.saturating_add(ms(cfg.header_read_timeout.0));
        match proxy_header::read_exactly(&mut stream, UNIX_CLIENT, deadline).await {
            Ok((client, said)) => {
                live.load().counters.client_proxy.inc();
                peer = client;
                proxied = said;
            }
            Err(why) => {
                why.count(&live.load().counters);
                return;
            }
        }
    }
    // The parking lot holds TCP sockets: a Unix-socket session stays whole while idle.
    cfg.idle_release = crate::config::units::Dur(Duration::ZERO);
    let local = super::local::ConnLocal::unix(&stream, index).proxied(proxied);
    let session = Box::pin(serve_session(
        stream,
        peer,
        &live,
        &open,
        &cfg,
        shutdown,
        Some(since),
        None,
        local,
        None,
    ));
    let _ = session.await;
}
