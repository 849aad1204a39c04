//! `client cN`: connects (to `v1` unless `-connect` says otherwise: `IP:PORT`, or a Unix
//! socket's path, as `varnishd -a PATH` listens), sends a PROXY protocol header first when
//! `-proxy1`/`-proxy2` gave one, runs its specification and closes, `-repeat` times
//! (`-keepalive`: all on one connection); `-run` is `-start` then `-wait`.

use std::io::Write as _;

use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;

use super::stream::{Stream, Where};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::Conn;
use super::context::{Flavour, Halt, Shared, Step, skip};
use super::http::Session;
use super::peer::{self, Arg, Peer, Role, value};
use super::sock::resolve;
use super::spec;

pub struct Client {
    peer: Peer,
    connect: Option<String>,
    rcvbuf: Option<usize>,
    /// `-proxy1` / `-proxy2`: the header each connection starts with.
    proxy: Option<Vec<u8>>,
}

impl Client {
    pub fn new(name: &str) -> Client {
        Client {
            peer: Peer::new(name),
            connect: None,
            rcvbuf: None,
            proxy: None,
        }
    }

    /// One `client cN ...` command (its words after the name, macros expanded).
    pub fn command(&mut self, shared: &Arc<Shared>, args: &[Arg]) -> Step {
        peer::command(self, shared, args)
    }

    /// `-wait`: until it is done.
    pub fn wait(&mut self, shared: &Shared) -> Step {
        self.peer.wait(shared, Self::KIND)
    }
}

impl Role for Client {
    const KIND: &'static str = "client";

    fn peer(&mut self) -> &mut Peer {
        &mut self.peer
    }

    fn option(&mut self, shared: &Arc<Shared>, args: &[Arg], i: &mut usize) -> Step<bool> {
        match args[*i].0.as_str() {
            "-run" => {
                self.start(shared)?;
                self.wait(shared)?;
            }
            "-connect" => {
                *i += 1;
                let c = value(args, *i, "-connect")?;
                if c.starts_with('@') {
                    return skip("clients on abstract Unix sockets (client -connect @NAME)");
                }
                self.connect = Some(c.to_string());
            }
            "-rcvbuf" => {
                *i += 1;
                self.rcvbuf = Some(
                    value(args, *i, "-rcvbuf")?
                        .parse()
                        .map_err(|_| Halt::Fail("-rcvbuf: not a size".into()))?,
                );
            }
            a @ ("-proxy1" | "-proxy2") => {
                *i += 1;
                let version = if a == "-proxy1" { 1 } else { 2 };
                self.proxy = Some(super::proxy_hdr::header(version, value(args, *i, a)?)?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn start(&mut self, shared: &Arc<Shared>) -> Step {
        self.wait(shared)?;
        let target = match &self.connect {
            Some(c) => c.clone(),
            None => match shared.flavour {
                Flavour::Trunk => "${v1_sock}".to_string(),
                Flavour::Legacy => "${v1_addr} ${v1_port}".to_string(),
            },
        };
        let target = shared.expand(&target)?;
        let addr = if target.starts_with('/') {
            Where::Unix(target.clone().into())
        } else {
            Where::Tcp(resolve(&target)?)
        };
        shared.log(
            &self.peer.name,
            format!("Starting client (connect {target})"),
        );
        let (repeat, keepalive, rcvbuf) = (self.peer.repeat, self.peer.keepalive, self.rcvbuf);
        let proxy = self.proxy.clone();
        self.peer.spawn(shared, move |shared, name, spec, line| {
            run(
                shared,
                name,
                addr,
                (spec, line),
                (repeat, keepalive, rcvbuf, proxy.as_deref()),
            )
        })
    }
}

/// Connects to `addr` and runs the specification `repeat` times (`keepalive`: all on one
/// connection), each connection starting with `proxy` when given.
fn run(
    shared: &Arc<Shared>,
    name: &str,
    addr: Where,
    (spec, line): (&str, u32),
    (repeat, keepalive, rcvbuf, proxy): (u32, bool, Option<usize>, Option<&[u8]>),
) -> Step {
    let connect = || -> Step<Session> {
        let left = shared.deadline.saturating_duration_since(Instant::now());
        let failed =
            |what: &dyn std::fmt::Display, e| Halt::Fail(format!("Failed to open {what}: {e}"));
        let stream = match &addr {
            Where::Tcp(a) => {
                let s = TcpStream::connect_timeout(a, left.min(Duration::from_secs(10)))
                    .map_err(|e| failed(a, e))?;
                if let Some(n) = rcvbuf {
                    let _ = socket2::SockRef::from(&s).set_recv_buffer_size(n);
                }
                shared.log(name, format!("Connected to {a}"));
                if let Some(h) = proxy {
                    (&s).write_all(h)
                        .map_err(|e| Halt::Fail(format!("PROXY header: {e}")))?;
                }
                Stream::Tcp(s)
            }
            Where::Unix(p) => {
                // A local connect does not wait for a peer: it is there or refused.
                let s = UnixStream::connect(p).map_err(|e| failed(&p.display(), e))?;
                if let Some(n) = rcvbuf {
                    let _ = socket2::SockRef::from(&s).set_recv_buffer_size(n);
                }
                shared.log(name, format!("Connected to {}", p.display()));
                if let Some(h) = proxy {
                    (&s).write_all(h)
                        .map_err(|e| Halt::Fail(format!("PROXY header: {e}")))?;
                }
                Stream::Unix(s)
            }
        };
        Ok(Session::new(
            shared.clone(),
            name,
            Conn::new(shared.clone(), stream, None),
            false,
        ))
    };
    let close = |s: Session| {
        if let Some(c) = &s.conn {
            let _ = c.stream().shutdown(Shutdown::Both);
        }
        shared.log(name, "Closing");
    };
    if keepalive {
        let mut s = connect()?;
        for _ in 0..repeat {
            spec::run(&mut s, spec, line)?;
        }
        close(s);
        return Ok(());
    }
    for _ in 0..repeat {
        let mut s = connect()?;
        spec::run(&mut s, spec, line)?;
        close(s);
    }
    Ok(())
}
