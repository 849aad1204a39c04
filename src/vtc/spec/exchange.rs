//! A specification's HTTP message commands (`txreq`, `txresp`, `rxreq`, `rxresp` and their
//! parts) and its checks on what was received (`expect`, `expect_pattern`, `expect_close`,
//! `gunzip`).

use super::checks::{conn, no_args, only_client, only_server};
use crate::vtc::conn::RxError;
use crate::vtc::context::{Halt, Step, fail};
use crate::vtc::expect;
use crate::vtc::http::Session;
use crate::vtc::tx::arg;

/// `txreq`, `txresp` and the `rx*` commands.
pub(super) fn message(s: &mut Session, args: &[String]) -> Step {
    match args[0].as_str() {
        "txreq" => {
            only_client(s, args)?;
            s.tx(args)
        }
        "txresp" => {
            only_server(s, args)?;
            s.tx(args)
        }
        "rxreq" => {
            only_server(s, args)?;
            no_args(args)?;
            s.rx_req(true)
        }
        "rxreqhdrs" | "rxhdrs" => {
            no_args(args)?;
            s.rx_req(false)
        }
        "rxreqbody" | "rxbody" => {
            only_server(s, args)?;
            no_args(args)?;
            s.swallow_body(true, false, 0)
        }
        "rxresp" => {
            only_client(s, args)?;
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
            only_client(s, args)?;
            no_args(args)?;
            s.rx_resp(false)
        }
        "rxrespbody" => {
            only_client(s, args)?;
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
            only_client(s, args)?;
            if s.body.is_none() {
                s.body = Some(Vec::new());
            }
            if let Some(0) = s.rx_chunk()? {
                let len = s.body.as_ref().map_or(0, Vec::len);
                s.bodylen = Some(len.to_string());
            }
            Ok(())
        }
        other => fail(format!("message: {other} is not one of its commands")),
    }
}

/// `expect`, `expect_pattern`, `expect_close`, `gunzip`.
pub(super) fn check(s: &mut Session, args: &[String], line: u32) -> Step {
    match args[0].as_str() {
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
        other => fail(format!("check: {other} is not one of its commands")),
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
