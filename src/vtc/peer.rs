//! What `client cN` and `server sN` share: the options both take, the thread that runs the
//! specification, and waiting for it (vtc_client.c and vtc_server.c alike).

use std::sync::Arc;
use std::thread::JoinHandle;

use super::context::{Halt, Shared, Step, fail, skip};

/// One word of a command after macro expansion: text, from a block, line.
pub type Arg = (String, bool, u32);

/// A client's or a server's own part of a `client cN ...` / `server sN ...` command.
pub trait Role {
    /// `client` or `server`, for the log and messages.
    const KIND: &'static str;
    fn peer(&mut self) -> &mut Peer;
    /// `-start`: its thread, running the specification.
    fn start(&mut self, shared: &Arc<Shared>) -> Step;
    /// An option only this role takes, at `args[*i]` (moving `*i` past its value); false
    /// when `args[*i]` is not one.
    fn option(&mut self, shared: &Arc<Shared>, args: &[Arg], i: &mut usize) -> Step<bool>;
}

/// One `client cN ...` or `server sN ...` command (its words after the name, macros
/// expanded): `-start`, `-wait`, `-repeat N`, `-keepalive`, the specification (a block or a
/// word not starting with `-`), then the role's own options; any other is skipped.
pub fn command<R: Role>(role: &mut R, shared: &Arc<Shared>, args: &[Arg]) -> Step {
    let mut i = 0;
    while i < args.len() {
        shared.check()?;
        let (a, block, line) = (&args[i].0, args[i].1, args[i].2);
        match a.as_str() {
            "-start" => role.start(shared)?,
            "-wait" => role.peer().wait(shared, R::KIND)?,
            "-repeat" => {
                i += 1;
                role.peer().repeat = value(args, i, "-repeat")?
                    .parse()
                    .map_err(|_| Halt::Fail("-repeat: not a count".into()))?;
            }
            "-keepalive" => role.peer().keepalive = true,
            _ if role.option(shared, args, &mut i)? => {}
            s if !s.starts_with('-') || block => {
                let peer = role.peer();
                peer.spec = s.to_string();
                peer.spec_line = line;
            }
            other => {
                return skip(format!(
                    "{} option {other} is not implemented by the runner",
                    R::KIND
                ));
            }
        }
        i += 1;
    }
    Ok(())
}

/// The value of the option before `args[i]`.
pub fn value<'a>(args: &'a [Arg], i: usize, what: &str) -> Step<&'a str> {
    args.get(i)
        .map(|a| a.0.as_str())
        .ok_or_else(|| Halt::Fail(format!("{what} needs an argument")))
}

/// A client's or server's name, specification, how often it runs it and its thread.
pub struct Peer {
    pub name: String,
    spec: String,
    spec_line: u32,
    /// `-repeat N`: runs of the specification (1).
    pub repeat: u32,
    /// `-keepalive`: all runs on one connection.
    pub keepalive: bool,
    thread: Option<JoinHandle<Step>>,
}

impl Peer {
    pub fn new(name: &str) -> Peer {
        Peer {
            name: name.to_string(),
            spec: String::new(),
            spec_line: 0,
            repeat: 1,
            keepalive: false,
            thread: None,
        }
    }

    /// Runs `run(shared, name, spec, line)` on a thread of its own; its failure is recorded
    /// for the file (`Shared::halt`), and its end logged.
    pub fn spawn(
        &mut self,
        shared: &Arc<Shared>,
        run: impl FnOnce(&Arc<Shared>, &str, &str, u32) -> Step + Send + 'static,
    ) -> Step {
        let (shared, name, spec, line) = (
            shared.clone(),
            self.name.clone(),
            self.spec.clone(),
            self.spec_line,
        );
        let thread = std::thread::Builder::new()
            .name(format!("vtc-{name}"))
            .spawn(move || {
                let r = run(&shared, &name, &spec, line);
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

    /// `-wait`: until its thread is done (at once when none runs).
    pub fn wait(&mut self, shared: &Shared, kind: &str) -> Step {
        let Some(t) = self.thread.take() else {
            return Ok(());
        };
        shared.log(&self.name, format!("Waiting for {kind}"));
        match t.join() {
            Ok(Ok(())) => Ok(()),
            // The thread recorded its own failure; the waiter only stops.
            Ok(Err(_)) => Err(Halt::Stopped),
            Err(_) => fail(format!("{kind} {} panicked", self.name)),
        }
    }

    /// Its thread, if one runs.
    pub fn take_thread(&mut self) -> Option<JoinHandle<Step>> {
        self.thread.take()
    }
}
