//! Running a client's or server's specification: each line split, its macros expanded, and
//! the command done on the session (vtc_http.c's `http_cmds`), plus the commands every level
//! has (`delay`, `barrier`, `loop`, 2.1's `sema`).

use std::io::Write;
use std::net::Shutdown;
use std::time::Duration;

use super::conn::{Conn, RxError};
use super::context::{Halt, Shared, Step, fail, skip};
use super::expect;
use super::http::Session;
use super::lex;
use super::tx::arg;

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

fn http_command(s: &mut Session, args: &[String], line: u32) -> Step {
    let only_client = |s: &Session| {
        if s.server {
            fail(format!("\"{}\" only possible in client", args[0]))
        } else {
            Ok(())
        }
    };
    let only_server = |s: &Session| {
        if s.server {
            Ok(())
        } else {
            fail(format!("\"{}\" only possible in server", args[0]))
        }
    };
    match args[0].as_str() {
        "txreq" => {
            only_client(s)?;
            s.tx(args)
        }
        "txresp" => {
            only_server(s)?;
            s.tx(args)
        }
        "rxreq" => {
            only_server(s)?;
            no_args(args)?;
            s.rx_req(true)
        }
        "rxreqhdrs" | "rxhdrs" => {
            no_args(args)?;
            s.rx_req(false)
        }
        "rxreqbody" | "rxbody" => {
            only_server(s)?;
            no_args(args)?;
            s.swallow_body(true, false, 0)
        }
        "rxresp" => {
            only_client(s)?;
            let mut body = true;
            for a in &args[1..] {
                if a == "-no_obj" {
                    body = false;
                } else {
                    return fail(format!("Unknown http rxresp spec: {a}"));
                }
            }
            s.rx_resp(body)
        }
        "rxresphdrs" => {
            only_client(s)?;
            no_args(args)?;
            s.rx_resp(false)
        }
        "rxrespbody" => {
            only_client(s)?;
            let mut max = 0;
            let mut i = 1;
            while i < args.len() {
                if args[i] == "-max" {
                    max = arg(args, i)?
                        .parse()
                        .map_err(|_| Halt::Fail("-max: not a number".into()))?;
                    i += 2;
                } else {
                    return fail(format!("Unknown http rxrespbody spec: {}", args[i]));
                }
            }
            s.swallow_body(false, true, max)
        }
        "rxchunk" => {
            only_client(s)?;
            if s.body.is_none() {
                s.body = Some(Vec::new());
            }
            if let Some(0) = s.rx_chunk()? {
                let len = s.body.as_ref().map_or(0, Vec::len);
                s.bodylen = Some(len.to_string());
            }
            Ok(())
        }
        "expect" => {
            if args.len() != 4 {
                return fail(format!("expect needs LHS OP RHS (line {line})"));
            }
            let lhs = s.resolve(&args[1]);
            let rhs = s.resolve(&args[3]);
            let msg = expect::check(
                s.shared.flavour,
                &args[1],
                lhs.as_deref(),
                &args[2],
                &args[3],
                rhs.as_deref(),
            )?;
            s.log(msg);
            Ok(())
        }
        "expect_pattern" => {
            let body = s.body.clone().unwrap_or_default();
            let mut t = b'0';
            for (i, &c) in body.iter().enumerate() {
                if c == 0 {
                    break;
                }
                if c != t {
                    return fail(format!(
                        "EXPECT PATTERN FAIL @{i} should 0x{t:02x} is 0x{c:02x}"
                    ));
                }
                t = (t + 1) & !0x08;
            }
            Ok(())
        }
        "expect_close" => expect_close(s),
        "send" => {
            let data = arg(args, 0)?.as_bytes().to_vec();
            s.send(&data)
        }
        "send_n" => {
            let n: usize = arg(args, 0)?
                .parse()
                .map_err(|_| Halt::Fail("send_n: not a count".into()))?;
            let data = args
                .get(2)
                .ok_or_else(|| Halt::Fail("send_n needs a string".into()))?
                .as_bytes()
                .repeat(n);
            s.send(&data)
        }
        "send_urgent" => send_urgent(s, arg(args, 0)?.as_bytes()),
        "sendhex" => {
            let data = hex(arg(args, 0)?)?;
            s.send(&data)
        }
        "recv" => {
            let n: usize = arg(args, 0)?
                .parse()
                .map_err(|_| Halt::Fail("recv: not a count".into()))?;
            let timeout = s.timeout;
            let conn = conn(s)?;
            match conn.need(n, timeout) {
                Ok(()) => {
                    conn.consume(n);
                    Ok(())
                }
                Err(RxError::Stopped) => Err(Halt::Stopped),
                Err(e) => s.trouble(format!("recv() got {e}")),
            }
        }
        "chunked" => {
            let data = arg(args, 0)?.as_bytes();
            let mut out = format!("{:x}\r\n", data.len()).into_bytes();
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
            s.send(&out)
        }
        "chunkedlen" => {
            let n: usize = arg(args, 0)?
                .parse()
                .map_err(|_| Halt::Fail("chunkedlen: not a number".into()))?;
            let pattern = |len: usize| (0..len).map(|u| b'0' + (u & 7) as u8).collect::<Vec<_>>();
            let mut out = Vec::new();
            if s.shared.flavour == super::context::Flavour::Legacy {
                // 2.1: the whole body in chunks of at most 16 KiB, then the last chunk.
                let mut u = 0;
                while u < n {
                    let v = (n - u).min(16384);
                    out.extend_from_slice(format!("{v:x}\r\n").as_bytes());
                    out.extend_from_slice(&pattern(v));
                    out.extend_from_slice(b"\r\n");
                    u += v;
                }
                out.extend_from_slice(b"0\r\n\r\n");
            } else if n == 0 {
                out.extend_from_slice(b"0\r\n\r\n");
            } else {
                out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                let p = pattern(16384);
                let mut u = 0;
                while u < n {
                    let v = (n - u).min(p.len());
                    out.extend_from_slice(&p[..v]);
                    u += v;
                }
                out.extend_from_slice(b"\r\n");
            }
            s.send(&out)
        }
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
            only_server(s)?;
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
            only_server(s)?;
            if let Some(c) = s.conn.take() {
                let _ = c.stream().shutdown(Shutdown::Both);
            }
            let listener = s
                .listener
                .clone()
                .ok_or_else(|| Halt::Fail("accept: no listening socket".into()))?;
            let stream = super::sock::accept(&s.shared, &listener)?;
            if let Ok(a) = stream.peer_addr() {
                s.rem_ip = a.ip().to_string();
                s.rem_port = a.port().to_string();
            }
            s.conn = Some(Conn::new(
                s.shared.clone(),
                stream,
                Some(listener.broken.clone()),
            ));
            s.log("Accepted");
            Ok(())
        }
        "write_body" => {
            let path = arg(args, 0)?;
            let body = s.body.clone().unwrap_or_default();
            std::fs::File::create(path)
                .and_then(|mut f| f.write_all(&body))
                .map_err(|e| Halt::Fail(format!("failed to write body: {e}")))
        }
        "txpri" | "rxpri" | "stream" | "settings" | "upgrade" => {
            skip(format!("HTTP/2 frames in VTC ({})", args[0]))
        }
        // The body just received, decoded (varnishtest's `gunzip`): fails on a body that is
        // not gzip.
        "gunzip" | "gunzip_body" => {
            let body = s.body.clone().unwrap_or_default();
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&body[..]), &mut out)
                .map_err(|e| Halt::Fail(format!("gunzip: {e}")))?;
            s.log(format!("gunzip: {} bytes from {}", out.len(), body.len()));
            s.bodylen = Some(out.len().to_string());
            s.body = Some(out);
            Ok(())
        }
        other => skip(format!(
            "VTC command {other:?} (line {line}) is not implemented by the runner"
        )),
    }
}

fn conn(s: &mut Session) -> Step<&mut Conn> {
    s.conn
        .as_mut()
        .ok_or_else(|| Halt::Fail("no connection (closed)".into()))
}

fn no_args(args: &[String]) -> Step {
    match args.get(1) {
        Some(a) => fail(format!("Unknown http {} spec: {a}", args[0])),
        None => Ok(()),
    }
}

/// `expect_close`: nothing but blanks before the peer closes.
fn expect_close(s: &mut Session) -> Step {
    let timeout = s.timeout;
    loop {
        let pending = conn(s)?.pending().to_vec();
        if let Some(&c) = pending.iter().find(|c| !c.is_ascii_whitespace()) {
            return s.trouble(format!("Expecting close: read = 1, c = 0x{c:02x}"));
        }
        let n = pending.len();
        conn(s)?.consume(n);
        match conn(s)?.fill(timeout) {
            Ok(_) => {}
            Err(RxError::Eof) => break,
            Err(RxError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(RxError::Stopped) => return Err(Halt::Stopped),
            Err(RxError::Timeout) => return s.trouble("Expected close: timeout".into()),
            Err(RxError::Io(e)) => return s.trouble(format!("Expected close: {e}")),
        }
    }
    s.log("EOF, as expected");
    Ok(())
}

/// TCP urgent data (`send(2)` with `MSG_OOB`).
fn send_urgent(s: &mut Session, data: &[u8]) -> Step {
    use std::os::fd::AsRawFd;
    let fd = conn(s)?.stream().as_raw_fd();
    // SAFETY: `fd` is the open socket `s` owns for this whole call; `data` is a live slice
    // whose pointer and length are passed together; send(2) only reads from it.
    let n = unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_OOB) };
    if usize::try_from(n).ok() != Some(data.len()) {
        return s.trouble(format!(
            "Write error in http_send_urgent(): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// `sendhex`: hex pairs, blanks ignored.
fn hex(text: &str) -> Step<Vec<u8>> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace())
        .map(|c| {
            (c as char)
                .to_digit(16)
                .map(|d| d as u8)
                .ok_or_else(|| Halt::Fail("Illegal hex string".into()))
        })
        .collect::<Step<_>>()?;
    Ok(digits
        .chunks(2)
        .map(|p| {
            if p.len() == 2 {
                p[0] << 4 | p[1]
            } else {
                p[0] << 4
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_pairs() {
        assert_eq!(
            super::hex("0F ee\na5 3").unwrap(),
            vec![0x0f, 0xee, 0xa5, 0x30]
        );
        assert!(super::hex("zz").is_err());
    }
}
