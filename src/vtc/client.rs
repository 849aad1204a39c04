//! `client cN`: connects (to `v1` unless `-connect` says otherwise), runs its specification
//! and closes, `-repeat` times (`-keepalive`: all on one connection); `-run` is `-start`
//! then `-wait`.

use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::conn::Conn;
use super::context::{Flavour, Halt, Shared, Step, fail, skip};
use super::http::Session;
use super::server::resolve;
use super::spec;

pub struct Client {
    pub name: String,
    connect: Option<String>,
    spec: String,
    spec_line: u32,
    repeat: u32,
    keepalive: bool,
    rcvbuf: Option<usize>,
    thread: Option<JoinHandle<Step>>,
}

impl Client {
    pub fn new(name: &str) -> Client {
        Client {
            name: name.to_string(),
            connect: None,
            spec: String::new(),
            spec_line: 0,
            repeat: 1,
            keepalive: false,
            rcvbuf: None,
            thread: None,
        }
    }

    /// One `client cN ...` command (its words after the name, macros expanded).
    pub fn command(&mut self, shared: &Arc<Shared>, args: &[(String, bool, u32)]) -> Step {
        let mut i = 0;
        while i < args.len() {
            shared.check()?;
            let (a, block, line) = (&args[i].0, args[i].1, args[i].2);
            match a.as_str() {
                "-start" => self.start(shared)?,
                "-wait" => self.wait(shared)?,
                "-run" => {
                    self.start(shared)?;
                    self.wait(shared)?;
                }
                "-repeat" => {
                    i += 1;
                    self.repeat = arg(args, i)?
                        .parse()
                        .map_err(|_| Halt::Fail("-repeat: not a count".into()))?;
                }
                "-keepalive" => self.keepalive = true,
                "-connect" => {
                    i += 1;
                    let c = arg(args, i)?;
                    if c.starts_with('/') || c.starts_with('@') {
                        return skip("clients on Unix domain sockets (client -connect PATH)");
                    }
                    self.connect = Some(c.to_string());
                }
                "-rcvbuf" => {
                    i += 1;
                    self.rcvbuf = Some(
                        arg(args, i)?
                            .parse()
                            .map_err(|_| Halt::Fail("-rcvbuf: not a size".into()))?,
                    );
                }
                "-proxy1" | "-proxy2" => {
                    return skip(format!("the PROXY protocol (client {a})"));
                }
                s if !s.starts_with('-') || block => {
                    self.spec = s.to_string();
                    self.spec_line = line;
                }
                other => {
                    return skip(format!(
                        "client option {other} is not implemented by the runner"
                    ));
                }
            }
            i += 1;
        }
        Ok(())
    }

    fn start(&mut self, shared: &Arc<Shared>) -> Step {
        if self.thread.is_some() {
            self.wait(shared)?;
        }
        let target = match &self.connect {
            Some(c) => c.clone(),
            None => match shared.flavour {
                Flavour::Trunk => "${v1_sock}".to_string(),
                Flavour::Legacy => "${v1_addr} ${v1_port}".to_string(),
            },
        };
        let target = shared.expand(&target)?;
        let addr = resolve(&target)?;
        shared.log(&self.name, format!("Starting client (connect {target})"));
        let (shared, name, spec, line) = (
            shared.clone(),
            self.name.clone(),
            self.spec.clone(),
            self.spec_line,
        );
        let (repeat, keepalive, rcvbuf) = (self.repeat, self.keepalive, self.rcvbuf);
        let thread = std::thread::Builder::new()
            .name(format!("vtc-{name}"))
            .spawn(move || {
                let r = run(&shared, &name, addr, &spec, line, repeat, keepalive, rcvbuf);
                if let Err(h) = &r {
                    shared.halt(&name, h);
                }
                shared.log(&name, "Ending");
                r
            })
            .map_err(|e| Halt::Fail(format!("cannot start a thread: {e}")))?;
        self.thread = Some(thread);
        Ok(())
    }

    /// `-wait`: until it is done.
    pub fn wait(&mut self, shared: &Shared) -> Step {
        let Some(t) = self.thread.take() else {
            return Ok(());
        };
        shared.log(&self.name, "Waiting for client");
        match t.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Halt::Stopped),
            Err(_) => fail(format!("client {} panicked", self.name)),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    shared: &Arc<Shared>,
    name: &str,
    addr: std::net::SocketAddr,
    spec: &str,
    line: u32,
    repeat: u32,
    keepalive: bool,
    rcvbuf: Option<usize>,
) -> Step {
    let connect = || -> Step<Session> {
        let left = shared.deadline.saturating_duration_since(Instant::now());
        let stream = TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(10)))
            .map_err(|e| Halt::Fail(format!("Failed to open {addr}: {e}")))?;
        if let Some(n) = rcvbuf {
            let _ = socket2::SockRef::from(&stream).set_recv_buffer_size(n);
        }
        shared.log(name, format!("Connected to {addr}"));
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

fn arg(args: &[(String, bool, u32)], i: usize) -> Step<&str> {
    args.get(i)
        .map(|a| a.0.as_str())
        .ok_or_else(|| Halt::Fail("option needs an argument".into()))
}
