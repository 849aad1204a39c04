//! `server sN`: a scripted origin on a loopback port (or a Unix socket, `-listen /PATH`). It accepts one connection at a time,
//! runs its specification on it and closes it, `-repeat` times (`-keepalive`: all on one
//! connection; `-dispatch`, for `s0` only, starts it: every connection at once, each on a thread). The
//! listening socket stays open between runs and after the last one, as in varnishtest, so
//! Shellac's connections then wait instead of being refused.

use std::net::Shutdown;
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::conn::Conn;
use super::context::{Flavour, Halt, Shared, Step, fail, skip};
use super::http::Session;
use super::peer::{self, Arg, Peer, Role, value};
use super::sock::{self, Listening, accept, resolve, sock_text};
use super::spec;
use super::stream::{Socket, Stream, Where};

pub struct Server {
    peer: Peer,
    listen: Option<String>,
    listener: Option<Arc<Listening>>,
    pub addr: Option<Where>,
    dispatch: bool,
}

impl Role for Server {
    const KIND: &'static str = "server";

    fn peer(&mut self) -> &mut Peer {
        &mut self.peer
    }

    fn option(&mut self, shared: &Arc<Shared>, args: &[Arg], i: &mut usize) -> Step<bool> {
        match args[*i].0.as_str() {
            "-break" => self.brk(shared),
            "-dispatch" => {
                if self.peer.name != "s0" {
                    return fail("-dispatch is only allowed for server s0");
                }
                // It starts the server too, as vtc_server.c's server_dispatch().
                self.dispatch = true;
                self.start(shared)?;
            }
            "-listen" => {
                *i += 1;
                let l = value(args, *i, "-listen")?;
                if l.starts_with('@') {
                    return skip("servers on abstract Unix sockets (server -listen @NAME)");
                }
                self.listen = Some(l.to_string());
                self.listener = None;
            }
            "-rcvbuf" => *i += 1,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn start(&mut self, shared: &Arc<Shared>) -> Step {
        self.peer.wait(shared, Self::KIND)?;
        let listener = self.bind(shared)?;
        shared.log(&self.peer.name, format!("Started on {:?}", self.addr));
        let (repeat, keepalive, dispatch) = (self.peer.repeat, self.peer.keepalive, self.dispatch);
        self.peer.spawn(shared, move |shared, name, spec, line| {
            serve(
                shared,
                name,
                &listener,
                (spec, line),
                (repeat, keepalive, dispatch),
            )
        })
    }
}

impl Server {
    pub fn new(name: &str) -> Server {
        Server {
            peer: Peer::new(name),
            listen: None,
            listener: None,
            addr: None,
            dispatch: false,
        }
    }

    /// Its name (`sN`).
    pub fn name(&self) -> &str {
        &self.peer.name
    }

    /// One `server sN ...` command (its words after the name, macros expanded).
    pub fn command(&mut self, shared: &Arc<Shared>, args: &[Arg]) -> Step {
        peer::command(self, shared, args)
    }

    fn bind(&mut self, shared: &Shared) -> Step<Arc<Listening>> {
        if let Some(l) = &self.listener {
            return Ok(l.clone());
        }
        let want = self.listen.clone().unwrap_or_else(|| "127.0.0.1 0".into());
        if want.starts_with('/') {
            return self.bind_unix(shared, &want);
        }
        let addr = resolve(&want)?;
        let listener = sock::bind(addr).map_err(|e| {
            Halt::Fail(format!(
                "Server listen address ({want}) cannot be bound: {e}"
            ))
        })?;
        let local = listener
            .local_addr()
            .map_err(|e| Halt::Fail(format!("{}: {e}", self.peer.name)))?;
        let (ip, port) = (local.ip().to_string(), local.port().to_string());
        let name = &self.peer.name;
        shared.define(name, &format!("{name}_addr"), ip.clone());
        shared.define(name, &format!("{name}_port"), port.clone());
        let sock = match shared.flavour {
            Flavour::Trunk => sock_text(local),
            Flavour::Legacy => format!("{ip} {port}"),
        };
        shared.define(name, &format!("{name}_sock"), sock);
        // Later starts listen on the same port.
        self.listen = Some(format!("{ip} {port}"));
        self.addr = Some(Where::Tcp(local));
        let l = Arc::new(Listening {
            socket: Socket::Tcp(listener),
            broken: Arc::new(AtomicBool::new(false)),
        });
        self.listener = Some(l.clone());
        Ok(l)
    }

    /// `-listen /path`: a Unix socket (a stale file removed first); `${sN_sock}` is its path,
    /// `${sN_addr}` and `${sN_port}` are `0.0.0.0` and `0`, as varnishtest defines them.
    fn bind_unix(&mut self, shared: &Shared, path: &str) -> Step<Arc<Listening>> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).map_err(|e| {
            Halt::Fail(format!(
                "Server listen address ({path}) cannot be bound: {e}"
            ))
        })?;
        let name = &self.peer.name;
        shared.define(name, &format!("{name}_addr"), "0.0.0.0".to_string());
        shared.define(name, &format!("{name}_port"), "0".to_string());
        shared.define(name, &format!("{name}_sock"), path.to_string());
        self.addr = Some(Where::Unix(path.into()));
        let l = Arc::new(Listening {
            socket: Socket::Unix(listener),
            broken: Arc::new(AtomicBool::new(false)),
        });
        self.listener = Some(l.clone());
        Ok(l)
    }

    /// `-break`: stop it now (its listening socket closes).
    fn brk(&mut self, shared: &Shared) {
        if let Some(l) = self.listener.take() {
            l.broken.store(true, Ordering::Release);
        }
        if let Some(t) = self.peer.take_thread() {
            shared.log(&self.peer.name, "Breaking");
            // It ends within 100 ms wherever it waits; its socket closes with it, so the
            // port is free for a later -start.
            let _ = t.join();
        }
    }

    /// The end of the file: what it still waits for or reads ends as stopped, not failed
    /// (varnishtest cancels its servers), before the proxy stops and closes its connections.
    pub fn cancel(&self) {
        if let Some(l) = &self.listener {
            l.broken.store(true, Ordering::Release);
        }
    }

    /// Its thread, if one runs (the end of the file cancels and joins it).
    pub fn take_thread(&mut self) -> Option<JoinHandle<Step>> {
        self.peer.take_thread()
    }
}

/// Accepts and runs the specification `repeat` times (`keepalive`: all on one connection;
/// `dispatch`: every connection at once, each on a thread).
fn serve(
    shared: &Arc<Shared>,
    name: &str,
    listener: &Arc<Listening>,
    (spec, line): (&str, u32),
    (repeat, keepalive, dispatch): (u32, bool, bool),
) -> Step {
    if dispatch {
        let mut workers = Vec::new();
        loop {
            let stream = match accept(shared, listener) {
                Ok(s) => s,
                Err(Halt::Stopped) => break,
                Err(e) => return Err(e),
            };
            let (shared, spec, listener) = (shared.clone(), spec.to_string(), listener.clone());
            let n = format!("{name}.{}", workers.len());
            workers.push(std::thread::spawn(move || {
                let r = session(&shared, &n, stream, &listener, &spec, line, 1);
                if let Err(h) = &r {
                    shared.halt(&n, h);
                }
            }));
        }
        for w in workers {
            let _ = w.join();
        }
        return Ok(());
    }
    if keepalive {
        let stream = accept(shared, listener)?;
        return session(shared, name, stream, listener, spec, line, repeat);
    }
    for i in 0..repeat {
        if repeat > 1 {
            shared.log(name, format!("Iteration {i}"));
        }
        let stream = accept(shared, listener)?;
        session(shared, name, stream, listener, spec, line, 1)?;
    }
    Ok(())
}

fn session(
    shared: &Arc<Shared>,
    name: &str,
    stream: Stream,
    listener: &Arc<Listening>,
    spec: &str,
    line: u32,
    times: u32,
) -> Step {
    let mut s = Session::new(
        shared.clone(),
        name,
        Conn::new(shared.clone(), stream, Some(listener.broken.clone())),
        true,
    );
    s.listener = Some(listener.clone());
    for _ in 0..times {
        spec::run(&mut s, spec, line)?;
    }
    if let Some(c) = s.conn.take() {
        let _ = c.stream().shutdown(Shutdown::Write);
        shared.log(name, "shutting fd");
    }
    Ok(())
}
