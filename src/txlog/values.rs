//! The values of a log line, written straight into its buffer: numbers, status codes, client
//! addresses (cached per writer thread), durations, and Apache-style escaping. Shared by the
//! text renderer (`render.rs`) and the JSON renderer (`json.rs`).

use std::cell::RefCell;
use std::io::Write as _;
use std::time::Duration;

/// Appends the first `len` bytes of `piece` by copying all `N` (a fixed-size store the
/// compiler inlines, where a run-time length means a `memcpy` call) and cutting the rest off.
#[inline]
pub(super) fn put_fixed<const N: usize>(out: &mut Vec<u8>, piece: &[u8; N], len: usize) {
    out.extend_from_slice(piece);
    out.truncate(out.len() - (N - len.min(N)));
}

/// A status code: three digits stored at once (itoa for anything else).
pub(super) fn status(code: u16, out: &mut Vec<u8>) {
    if (100..1000).contains(&code) {
        let digits = [
            b'0' + (code / 100) as u8,
            b'0' + (code / 10 % 10) as u8,
            b'0' + (code % 10) as u8,
        ];
        out.extend_from_slice(&digits);
    } else {
        number(u64::from(code), out);
    }
}

/// Decimal digits (itoa: no `core::fmt`; the writer prints several numbers per line).
pub(super) fn number(n: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The last client address and its text (at most 39 bytes, IPv6 included).
struct LastIp {
    addr: Option<std::net::IpAddr>,
    text: [u8; 40],
    len: usize,
}

thread_local! {
    /// Consecutive records often share a client (keep-alive connections, a proxy in front).
    static LAST_IP: RefCell<LastIp> = const {
        RefCell::new(LastIp { addr: None, text: [0; 40], len: 0 })
    };
}

/// Client address, from the cache when it is the previous record's; an IPv4 address is
/// copied as one 16-byte store.
pub(super) fn client_ip(addr: std::net::IpAddr, out: &mut Vec<u8>) {
    LAST_IP.with_borrow_mut(|last| {
        if last.addr != Some(addr) {
            let mut text = Vec::with_capacity(40);
            ip(addr, &mut text);
            let len = text.len().min(40);
            last.text[..len].copy_from_slice(&text[..len]);
            last.len = len;
            last.addr = Some(addr);
        }
        match last.text.first_chunk::<16>() {
            Some(v4) if last.len <= 16 => put_fixed(out, v4, last.len),
            _ => out.extend_from_slice(&last.text[..last.len]),
        }
    });
}

pub(super) fn ip(addr: std::net::IpAddr, out: &mut Vec<u8>) {
    match addr {
        std::net::IpAddr::V4(v4) => {
            // Built on the stack and copied once: at most 15 bytes.
            let mut buf = [0u8; 15];
            let mut n = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    buf[n] = b'.';
                    n += 1;
                }
                if octet >= 100 {
                    buf[n] = b'0' + octet / 100;
                    n += 1;
                }
                if octet >= 10 {
                    buf[n] = b'0' + octet / 10 % 10;
                    n += 1;
                }
                buf[n] = b'0' + octet % 10;
                n += 1;
            }
            out.extend_from_slice(&buf[..n]);
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// `1.000250`: seconds with microsecond precision.
pub(super) fn seconds(d: Duration, out: &mut Vec<u8>) {
    number(d.as_secs(), out);
    let mut frac = *b".000000";
    let mut micros = d.subsec_micros();
    for digit in frac[1..].iter_mut().rev() {
        *digit = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    out.extend_from_slice(&frac);
}

/// Bytes printed as they are in text formats; everything else becomes `\\xHH`.
const fn safe_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0x20;
    while b < 0x7f {
        t[b] = b != b'"' as usize && b != b'\\' as usize;
        b += 1;
    }
    t
}
static SAFE: [bool; 256] = safe_table();

/// Apache-style escaping: `"`, `\\` and control or non-ASCII bytes become `\\xHH`, so a header
/// value can never break a line or a quoted field. Runs of safe bytes are copied at once.
pub(super) fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    // The common case: nothing to escape, one copy.
    let Some(first) = bytes.iter().position(|&b| !SAFE[b as usize]) else {
        out.extend_from_slice(bytes);
        return;
    };
    out.extend_from_slice(&bytes[..first]);
    for &b in &bytes[first..] {
        if SAFE[b as usize] {
            out.push(b);
        } else {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[b'\\', b'x', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_addresses() {
        let mut s = Vec::new();
        for n in [0, 7, 10, 65535, u64::MAX] {
            number(n, &mut s);
            s.push(b' ');
        }
        ip("10.0.255.1".parse().unwrap(), &mut s);
        s.push(b' ');
        ip("::1".parse().unwrap(), &mut s);
        s.push(b' ');
        for micros in [0, 250, 1_000_000, 12_345_678] {
            seconds(Duration::from_micros(micros), &mut s);
            s.push(b' ');
        }
        escape("a\"b\\c\u{7f}é ok".as_bytes(), &mut s);
        assert_eq!(
            String::from_utf8(s).unwrap(),
            "0 7 10 65535 18446744073709551615 10.0.255.1 ::1 0.000000 0.000250 1.000000 12.345678 a\\x22b\\x5cc\\x7f\\xc3\\xa9 ok"
        );
    }

    #[test]
    fn the_client_address_cache_follows_the_address() {
        let mut s = Vec::new();
        for a in ["10.0.0.1", "10.0.0.1", "192.0.2.77"] {
            client_ip(a.parse().unwrap(), &mut s);
            s.push(b' ');
        }
        assert_eq!(s, b"10.0.0.1 10.0.0.1 192.0.2.77 ");
    }
}
