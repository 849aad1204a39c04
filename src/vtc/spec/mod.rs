//! Running a client's or server's specification: each line split, its macros expanded, and
//! the command done on the session (vtc_http.c's `http_cmds`), plus the commands every level
//! has (`delay`, `barrier`, `loop`, 2.1's `sema`).

use std::net::Shutdown;
use std::time::Duration;

mod checks;
mod exchange;
mod wire;

use super::conn::Conn;
use super::context::{Halt, Shared, Step, fail, skip};
use super::expect;
use super::http::Session;
use super::lex;
use super::tx::arg;
use checks::{conn, only_server};

/// Runs `spec` (starting on line `line`) on `s`.
pub fn run(s: &mut Session, spec: &str, line: u32) -> Step {
    let cmds = lex::split(spec, line).map_err(|e| Halt::Fail(format!("VTC syntax: {e}")))?;
    for cmd in cmds {
        s.shared.check()?;
        let args = cmd
            .words
            .iter()
            .map(|w| s.shared.expand(&w.text))
            .collect::<Step<Vec<String>>>()?;
        let shared = s.shared.clone();
        let name = s.name.clone();
        if let Some(r) = common(&shared, &name, &args, cmd.line, &mut |block, l| {
            run(s, block, l)
        }) {
            r?;
            continue;
        }
        http_command(s, &args, cmd.line)?;
    }
    Ok(())
}

/// The commands of every level; `None` when `args` is not one of them. `nested` runs a block
/// (for `loop`).
pub fn common(
    shared: &Shared,
    who: &str,
    args: &[String],
    line: u32,
    nested: &mut dyn FnMut(&str, u32) -> Step,
) -> Option<Step> {
    let r = match args[0].as_str() {
        "delay" => (|| {
            let secs = expect::vnum(arg(args, 0)?);
            if !secs.is_finite() || secs < 0.0 {
                return fail(format!("delay {}: not a duration", args[1]));
            }
            shared.log(who, format!("delaying {secs} second(s)"));
            shared.sleep(Duration::from_secs_f64(secs))
        })(),
        "loop" => (|| {
            let n: u64 = arg(args, 0)?
                .parse()
                .map_err(|_| Halt::Fail(format!("loop {}: not a count", args[1])))?;
            let block = args
                .get(2)
                .ok_or_else(|| Halt::Fail("loop needs a block".into()))?;
            for i in 0..n {
                shared.log(who, format!("Loop #{i}"));
                nested(block, line)?;
            }
            Ok(())
        })(),
        "barrier" => (|| {
            let name = arg(args, 0)?;
            match args.get(2).map(String::as_str) {
                Some("sync") => match shared.barrier(name) {
                    Some(b) => b.sync(shared, who),
                    None => fail(format!("Barrier({name}) is not declared")),
                },
                Some("cond" | "sock") => {
                    let parties: usize =
                        args.get(3).and_then(|n| n.parse().ok()).ok_or_else(|| {
                            Halt::Fail(format!("barrier {name}: needs a number of parties"))
                        })?;
                    let cyclic = args.iter().skip(4).any(|a| a == "-cyclic");
                    shared.barrier_or_insert(name, || {
                        super::barrier::Barrier::new(name, parties, cyclic)
                    });
                    Ok(())
                }
                Some("-start") | Some("-wait") | None => Ok(()),
                Some(other) => skip(format!("barrier {other} is not implemented by the runner")),
            }
        })(),
        // 2.1's semaphores: `sema rN sync N`, any number of times.
        "sema" => (|| {
            let name = arg(args, 0)?;
            let parties: usize = args
                .get(3)
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| Halt::Fail(format!("sema {name}: needs a count")))?;
            let b = shared
                .barrier_or_insert(name, || super::barrier::Barrier::new(name, parties, true));
            b.sync(shared, who)
        })(),
        _ => return None,
    };
    Some(r)
}

/// One HTTP-level command: the message commands and checks (`exchange`), raw bytes on the
/// wire (`wire`), and the session's own state (timeouts, closing, accepting).
fn http_command(s: &mut Session, args: &[String], line: u32) -> Step {
    match args[0].as_str() {
        "txreq" | "txresp" | "rxreq" | "rxreqhdrs" | "rxhdrs" | "rxreqbody" | "rxbody"
        | "rxresp" | "rxresphdrs" | "rxrespbody" | "rxchunk" => exchange::message(s, args),
        "expect" | "expect_pattern" | "expect_close" | "gunzip" | "gunzip_body" => {
            exchange::check(s, args, line)
        }
        "send" | "send_n" | "send_urgent" | "sendhex" | "recv" | "chunked" | "chunkedlen"
        | "write_body" => wire::command(s, args),
        "timeout" => {
            let t = expect::vnum(arg(args, 0)?);
            if !t.is_finite() || t < 0.0 {
                return fail(format!("timeout is not a number ({})", args[1]));
            }
            s.timeout = Duration::from_secs_f64(t);
            Ok(())
        }
        "fatal" => {
            s.fatal = true;
            Ok(())
        }
        "non_fatal" => {
            s.fatal = false;
            Ok(())
        }
        "close" => {
            only_server(s, args)?;
            if let Some(c) = s.conn.take() {
                let _ = c.stream().shutdown(Shutdown::Both);
            }
            s.log("Closed");
            Ok(())
        }
        "shutdown" => {
            let how = match args.get(1).map(String::as_str) {
                None => Shutdown::Both,
                Some("-read") => Shutdown::Read,
                Some("-write") => Shutdown::Write,
                Some(o) => return skip(format!("shutdown {o} is not implemented by the runner")),
            };
            let _ = conn(s)?.stream().shutdown(how);
            Ok(())
        }
        "accept" => {
            only_server(s, args)?;
            if let Some(c) = s.conn.take() {
                let _ = c.stream().shutdown(Shutdown::Both);
            }
            let listener = s
                .listener
                .clone()
                .ok_or_else(|| Halt::Fail("accept: no listening socket".into()))?;
            let stream = super::sock::accept(&s.shared, &listener)?;
            if let Some(a) = stream.peer_addr() {
                s.rem_ip = a.ip().to_string();
                s.rem_port = a.port().to_string();
            }
            s.rem_path = stream.unix_path();
            s.conn = Some(Conn::new(
                s.shared.clone(),
                stream,
                Some(listener.broken.clone()),
            ));
            s.log("Accepted");
            Ok(())
        }
        "txpri" | "rxpri" | "stream" | "settings" | "upgrade" => {
            skip(format!("HTTP/2 frames in VTC ({})", args[0]))
        }
        other => skip(format!(
            "VTC command {other:?} (line {line}) is not implemented by the runner"
        )),
    }
}
