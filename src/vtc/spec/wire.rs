//! A specification's raw bytes on the wire: `send`, `send_n`, `send_urgent`, `sendhex`,
//! `recv`, `chunked`, `chunkedlen`, and `write_body` (the body received, to a file).

use std::io::Write;

use super::checks::conn;
use crate::vtc::conn::RxError;
use crate::vtc::context::{Halt, Step, fail};
use crate::vtc::http::Session;
use crate::vtc::tx::arg;

/// One of the wire commands.
pub(super) fn command(s: &mut Session, args: &[String]) -> Step {
    match args[0].as_str() {
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
            if s.shared.flavour == crate::vtc::context::Flavour::Legacy {
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
        "write_body" => {
            let path = arg(args, 0)?;
            let body = s.body.clone().unwrap_or_default();
            std::fs::File::create(path)
                .and_then(|mut f| f.write_all(&body))
                .map_err(|e| Halt::Fail(format!("failed to write body: {e}")))
        }
        other => fail(format!("wire: {other} is not one of its commands")),
    }
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
