//! A scripted peer's connection and a server's listening socket, over TCP or a Unix domain
//! socket (`server sN -listen /path`, `client cN -connect /path`): one type for both, so the
//! rest of the runner reads, writes, times out and shuts down either the same way.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

/// A connection.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(d),
            Stream::Unix(s) => s.set_read_timeout(d),
        }
    }

    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(d),
            Stream::Unix(s) => s.set_write_timeout(d),
        }
    }

    /// No Nagle delay (TCP; a Unix socket has none).
    pub fn set_nodelay(&self) {
        if let Stream::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(on),
            Stream::Unix(s) => s.set_nonblocking(on),
        }
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        }
    }

    /// The peer's address; a Unix socket's peer has none (`None`).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        match self {
            Stream::Tcp(s) => s.peer_addr().ok(),
            Stream::Unix(_) => None,
        }
    }

    /// A Unix socket connection's path (varnishtest's `remote.path`): the socket a client
    /// connected to, or the one a server accepted on; `None` over TCP.
    pub fn unix_path(&self) -> Option<String> {
        match self {
            Stream::Tcp(_) => None,
            Stream::Unix(s) => [s.peer_addr(), s.local_addr()]
                .into_iter()
                .flatten()
                .find_map(|a| a.as_pathname().map(|p| p.display().to_string())),
        }
    }

    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match *self {
            Stream::Tcp(s) => (&*s).read(buf),
            Stream::Unix(s) => (&*s).read(buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match *self {
            Stream::Tcp(s) => (&*s).write(buf),
            Stream::Unix(s) => (&*s).write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A server's listening socket (a Unix one's file stays, in the file's temporary directory:
/// a later start of the server binds it again).
#[derive(Debug)]
pub enum Socket {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Socket {
    pub fn accept(&self) -> io::Result<Stream> {
        Ok(match self {
            Socket::Tcp(l) => Stream::Tcp(l.accept()?.0),
            Socket::Unix(l) => Stream::Unix(l.accept()?.0),
        })
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Socket::Tcp(l) => l.as_raw_fd(),
            Socket::Unix(l) => l.as_raw_fd(),
        }
    }
}

/// Where a server listens: a TCP address or a Unix socket's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Where {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Where {
    /// The Varnish backend declaration's address fields: `.host` and `.port`, or `.path`.
    pub fn backend_fields(&self) -> String {
        match self {
            Where::Tcp(a) => format!(".host = \"{}\"; .port = \"{}\";", a.ip(), a.port()),
            Where::Unix(p) => format!(".path = \"{}\";", p.display()),
        }
    }
}
