//! The PROXY protocol (HAProxy's specification, versions 1 and 2): the header a load balancer
//! or TLS terminator sends before a connection's first byte, naming the client it accepted.
//! [`parse`] reads one from the start of a byte buffer (listeners with
//! `server.proxy_protocol`); [`v1`] and [`v2`] write one (`[[backend]] proxy_protocol`).
//!
//! Written here rather than taken from a crate (`ppp`, `proxy-header`): the reader must say
//! how many bytes the header took from a *peeked* buffer — the session after it (the h1 gate,
//! the TLS handshake, the HTTP/2 preface sniff, the parking lot) reads the socket itself, so
//! not one byte past the header may be consumed — and what is needed is ~200 lines with no
//! dependency. Fuzzed by fuzz/fuzz_targets/proxy_protocol.rs.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The 12 bytes every version 2 header starts with.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 header, `CRLF` included (the specification's bound).
pub const V1_MAX: usize = 107;
/// A version 2 header's fixed part: signature, version and command, family, length.
pub const V2_FIXED: usize = 16;

/// A complete header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// 1 or 2.
    pub version: u8,
    /// The client's address and port; `None` for a v2 `LOCAL` command (the balancer's own
    /// health check), v1 `UNKNOWN`, or an address family without ports (`AF_UNIX`, `UNSPEC`):
    /// the connection's own peer stands.
    pub source: Option<SocketAddr>,
    /// The address the client connected to (on the balancer), when `source` is given.
    pub destination: Option<SocketAddr>,
}

/// What the start of a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A header of `len` bytes; the connection's own bytes follow it.
    Done { len: usize, header: Header },
    /// The start of a header; `Some(n)`: it is `n` bytes long in all (v2, once its fixed part
    /// is in), `None`: not known yet (v1 until its `CRLF`).
    Incomplete(Option<usize>),
}

/// Why a buffer does not start with a valid header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The first bytes are neither `PROXY ` nor the v2 signature: no header was sent.
    #[error("the connection does not start with a PROXY protocol header")]
    Missing,
    /// A header that breaks the specification.
    #[error("malformed PROXY protocol header: {0}")]
    Malformed(&'static str),
}

/// Reads the header at the start of `buf` (which may hold more: the connection's bytes).
pub fn parse(buf: &[u8]) -> Result<Parsed, Error> {
    if buf.is_empty() {
        return Ok(Parsed::Incomplete(None));
    }
    if buf[0] == b'P' {
        let n = buf.len().min(6);
        if buf[..n] != b"PROXY "[..n] {
            return Err(Error::Missing);
        }
        return v1_parse(buf);
    }
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] != V2_SIGNATURE[..n] {
        return Err(Error::Missing);
    }
    v2_parse(buf)
}

fn v1_parse(buf: &[u8]) -> Result<Parsed, Error> {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
        if window.len() == V1_MAX || window.contains(&b'\n') {
            return Err(Error::Malformed("v1 header without CRLF within 107 bytes"));
        }
        return Ok(Parsed::Incomplete(None));
    };
    if buf[..end].iter().any(|b| !(b' '..=b'~').contains(b)) {
        return Err(Error::Malformed(
            "v1 header holds a byte that is not printable ASCII",
        ));
    }
    let line = std::str::from_utf8(&buf[6..end])
        .map_err(|_| Error::Malformed("v1 header is not ASCII"))?;
    let len = end + 2;
    let mut words = line.split(' ');
    let family = words.next().unwrap_or_default();
    let header = match family {
        // The sender could not tell (or proxies something else): the rest of the line is
        // to be ignored, and the connection's own addresses stand.
        "UNKNOWN" => Header {
            version: 1,
            source: None,
            destination: None,
        },
        "TCP4" | "TCP6" => {
            let v6 = family == "TCP6";
            let (Some(src), Some(dst), Some(sport), Some(dport), None) = (
                words.next(),
                words.next(),
                words.next(),
                words.next(),
                words.next(),
            ) else {
                return Err(Error::Malformed(
                    "v1 header needs exactly: source destination sport dport",
                ));
            };
            let ip = |s: &str| -> Result<IpAddr, Error> {
                if v6 {
                    s.parse::<Ipv6Addr>().map(IpAddr::V6)
                } else {
                    s.parse::<Ipv4Addr>().map(IpAddr::V4)
                }
                .map_err(|_| Error::Malformed("v1 address is not of its family"))
            };
            Header {
                version: 1,
                source: Some(SocketAddr::new(ip(src)?, port(sport)?)),
                destination: Some(SocketAddr::new(ip(dst)?, port(dport)?)),
            }
        }
        _ => return Err(Error::Malformed("v1 family is not TCP4, TCP6 or UNKNOWN")),
    };
    Ok(Parsed::Done { len, header })
}

/// A v1 port: decimal, no sign, no leading zero, at most 65535.
fn port(s: &str) -> Result<u16, Error> {
    let bad = Error::Malformed("v1 port is not a number 0-65535 without leading zeros");
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(bad);
    }
    s.parse().map_err(|_| bad)
}

fn v2_parse(buf: &[u8]) -> Result<Parsed, Error> {
    if buf.len() < V2_FIXED {
        return Ok(Parsed::Incomplete(None));
    }
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Err(Error::Malformed("v2 version is not 2"));
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Err(Error::Malformed("v2 command is neither LOCAL nor PROXY")),
    };
    let family = buf[13] >> 4;
    let transport = buf[13] & 0x0f;
    if family > 3 || transport > 2 {
        return Err(Error::Malformed(
            "v2 address family or transport is unknown",
        ));
    }
    let body = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let len = V2_FIXED + body;
    if buf.len() < len {
        return Ok(Parsed::Incomplete(Some(len)));
    }
    let block = &buf[V2_FIXED..len];
    // The address block's size: the TLVs (if any) follow it.
    let addresses = match family {
        1 => 12,
        2 => 36,
        3 => 216,
        _ => 0,
    };
    // A LOCAL header's block is skipped whole, as the specification says; a PROXY one's
    // TLVs must fit it (and its checksum, when given, match).
    if !local && let Some(tlvs) = block.get(addresses..) {
        check_tlvs(tlvs, V2_FIXED + addresses, &buf[..len])?;
    }
    let (source, destination) = match family {
        _ if local => (None, None),
        1 => {
            let a: &[u8; 12] =
                block
                    .get(..12)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(Error::Malformed(
                        "v2 IPv4 address block is shorter than 12 bytes",
                    ))?;
            let ip = |o: usize| IpAddr::V4(Ipv4Addr::new(a[o], a[o + 1], a[o + 2], a[o + 3]));
            let p = |o: usize| u16::from_be_bytes([a[o], a[o + 1]]);
            (
                Some(SocketAddr::new(ip(0), p(8))),
                Some(SocketAddr::new(ip(4), p(10))),
            )
        }
        2 => {
            let a: &[u8; 36] =
                block
                    .get(..36)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(Error::Malformed(
                        "v2 IPv6 address block is shorter than 36 bytes",
                    ))?;
            let ip = |o: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&a[o..o + 16]);
                IpAddr::V6(Ipv6Addr::from(b))
            };
            let p = |o: usize| u16::from_be_bytes([a[o], a[o + 1]]);
            (
                Some(SocketAddr::new(ip(0), p(32))),
                Some(SocketAddr::new(ip(16), p(34))),
            )
        }
        // UNSPEC, or AF_UNIX (216 bytes of paths): no address with a port to give.
        _ => (None, None),
    };
    Ok(Parsed::Done {
        len,
        header: Header {
            version: 2,
            source,
            destination,
        },
    })
}

/// The TLV types whose value is read here: the CRC32C checksum of the whole header, and the
/// SSL block (1 byte of flags and 4 of verify result, then TLVs of its own).
const PP2_TYPE_CRC32C: u8 = 0x03;
const PP2_TYPE_SSL: u8 = 0x20;

/// Checks the TLVs of a v2 header: `tlvs` (at offset `at` of `header`, the whole header)
/// must be a sequence of whole `type, length (2 bytes), value` entries, an SSL entry's
/// sub-entries too, and a `PP2_TYPE_CRC32C` entry's value must be the CRC-32C of `header`
/// with that value zeroed (the specification: a mismatch makes the connection invalid).
fn check_tlvs(tlvs: &[u8], at: usize, header: &[u8]) -> Result<(), Error> {
    let mut rest = tlvs;
    let mut offset = at;
    while !rest.is_empty() {
        if rest.len() < 3 {
            return Err(Error::Malformed(
                "v2 TLV: bytes left over that are not a whole TLV",
            ));
        }
        let kind = rest[0];
        let n = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
        let Some(value) = rest.get(3..3 + n) else {
            return Err(Error::Malformed("v2 TLV: its length runs past the header"));
        };
        match kind {
            PP2_TYPE_CRC32C => {
                let Ok(sent) = <[u8; 4]>::try_from(value) else {
                    return Err(Error::Malformed("v2 TLV: a CRC32C value is not 4 bytes"));
                };
                let mut zeroed = header.to_vec();
                zeroed[offset + 3..offset + 7].fill(0);
                if crc32c(&zeroed) != u32::from_be_bytes(sent) {
                    return Err(Error::Malformed(
                        "v2 TLV: the CRC32C checksum does not match",
                    ));
                }
            }
            PP2_TYPE_SSL => {
                if n < 5 {
                    return Err(Error::Malformed(
                        "v2 TLV: an SSL value is shorter than 5 bytes",
                    ));
                }
                check_tlvs(&value[5..], offset + 3 + 5, header)?;
            }
            _ => {}
        }
        rest = &rest[3 + n..];
        offset += 3 + n;
    }
    Ok(())
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as RFC 4960 appendix B computes it.
fn crc32c(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82F6_3B78
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    !bytes.iter().fold(!0u32, |c, &b| {
        TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

/// Both addresses of one family: IPv4 when both are (IPv4-mapped IPv6 counts as IPv4),
/// else both as IPv6.
fn same_family(source: SocketAddr, destination: SocketAddr) -> (SocketAddr, SocketAddr) {
    let canon = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let (s, d) = (canon(source), canon(destination));
    if s.is_ipv4() == d.is_ipv4() {
        return (s, d);
    }
    let six = |a: SocketAddr| match a.ip() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
        IpAddr::V6(_) => a,
    };
    (six(s), six(d))
}

/// A version 1 header (text) saying a connection from `source` to `destination`.
pub fn v1(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let (s, d) = same_family(source, destination);
    let family = if s.is_ipv4() { "TCP4" } else { "TCP6" };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        s.ip(),
        d.ip(),
        s.port(),
        d.port()
    )
    .into_bytes()
}

/// A version 2 header (binary, `PROXY` command over TCP, no TLVs) saying a connection from
/// `source` to `destination`.
pub fn v2(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let (s, d) = same_family(source, destination);
    let mut out = Vec::with_capacity(V2_FIXED + 36);
    out.extend_from_slice(&V2_SIGNATURE);
    out.push(0x21);
    match (s.ip(), d.ip()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            out.push(0x11);
            out.extend_from_slice(&12u16.to_be_bytes());
            out.extend_from_slice(&a.octets());
            out.extend_from_slice(&b.octets());
        }
        (a, b) => {
            let six = |ip: IpAddr| match ip {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => v6,
            };
            out.push(0x21);
            out.extend_from_slice(&36u16.to_be_bytes());
            out.extend_from_slice(&six(a).octets());
            out.extend_from_slice(&six(b).octets());
        }
    }
    out.extend_from_slice(&s.port().to_be_bytes());
    out.extend_from_slice(&d.port().to_be_bytes());
    out
}

/// The version 1 header of a connection that relays no client (a health probe).
pub fn v1_unknown() -> Vec<u8> {
    b"PROXY UNKNOWN\r\n".to_vec()
}

/// The version 2 `LOCAL` header: a connection the sender made on its own behalf (a health
/// probe), no addresses.
pub fn v2_local() -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(buf: &[u8]) -> (usize, Header) {
        match parse(buf) {
            Ok(Parsed::Done { len, header }) => (len, header),
            other => panic!("{other:?} for {buf:?}"),
        }
    }

    #[test]
    fn v1_tcp4_tcp6_and_unknown() {
        let text = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\nGET / HTTP/1.1\r\n";
        let (len, h) = done(text);
        assert_eq!(&text[len..len + 3], b"GET");
        assert_eq!(h.source, Some("192.0.2.7:56324".parse().unwrap()));
        assert_eq!(h.destination, Some("198.51.100.1:443".parse().unwrap()));
        let (_, h) = done(b"PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n");
        assert_eq!(h.source, Some("[2001:db8::1]:1".parse().unwrap()));
        let (len, h) = done(b"PROXY UNKNOWN ffff::1 whatever\r\nx");
        assert_eq!((len, h.source), (32, None));
        assert_eq!(done(b"PROXY UNKNOWN\r\n").0, 15);
    }

    #[test]
    fn v1_refuses_what_the_specification_does_not_allow() {
        for bad in [
            &b"PROXY TCP4 192.0.2.7 198.51.100.1 56324\r\n"[..],
            b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443 x\r\n",
            b"PROXY TCP4 2001:db8::1 198.51.100.1 1 2\r\n",
            b"PROXY TCP6 192.0.2.7 2001:db8::2 1 2\r\n",
            b"PROXY TCP4 192.0.2.7 198.51.100.1 056324 443\r\n",
            b"PROXY TCP4 192.0.2.7 198.51.100.1 65536 443\r\n",
            b"PROXY TCP4 192.0.2.7 198.51.100.1 +1 443\r\n",
            b"PROXY TCP4  192.0.2.7 198.51.100.1 1 443\r\n",
            b"PROXY UDP4 192.0.2.7 198.51.100.1 1 443\r\n",
            b"PROXY TCP4 192.0.2.7 198.51.100.1 1 443\n",
            b"PROXY UNKNOWN\nx\r\n",
            b"PROXY UNKNOWN\rx\r\n",
        ] {
            assert!(
                matches!(parse(bad), Err(Error::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!("PROXY UNKNOWN {}\r\n", "x".repeat(100));
        assert!(matches!(parse(long.as_bytes()), Err(Error::Malformed(_))));
    }

    #[test]
    fn prefixes_wait_and_other_bytes_are_no_header() {
        for n in 0..15 {
            assert_eq!(
                parse(&b"PROXY UNKNOWN\r\n"[..n]),
                Ok(Parsed::Incomplete(None))
            );
        }
        for n in 1..16 {
            assert_eq!(
                parse(&V2_SIGNATURE[..n.min(12)]),
                Ok(Parsed::Incomplete(None))
            );
        }
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Err(Error::Missing));
        assert_eq!(parse(b"PRI * HTTP/2.0"), Err(Error::Missing));
        assert_eq!(parse(&[0x16, 3, 1]), Err(Error::Missing));
        assert_eq!(parse(b"\r\n\r\nX"), Err(Error::Missing));
    }

    #[test]
    fn v2_round_trips_and_reads_local_and_tlvs() {
        let s: SocketAddr = "203.0.113.9:40000".parse().unwrap();
        let d: SocketAddr = "192.0.2.1:443".parse().unwrap();
        let mut h = v2(s, d);
        h.extend_from_slice(b"\x16\x03\x01");
        let (len, got) = done(&h);
        assert_eq!(len, 28);
        assert_eq!((got.source, got.destination), (Some(s), Some(d)));
        let s6: SocketAddr = "[2001:db8::9]:1".parse().unwrap();
        let (len, got) = done(&v2(s6, d));
        assert_eq!(len, 52);
        assert_eq!(got.source, Some(s6));
        assert_eq!(
            got.destination,
            Some("[::ffff:192.0.2.1]:443".parse().unwrap())
        );
        // A TLV (PP2_TYPE_AUTHORITY) after the addresses is inside the length and skipped.
        let mut with_tlv = v2(s, d);
        with_tlv[15] += 7;
        with_tlv.extend_from_slice(b"\x02\x00\x04host");
        assert_eq!(done(&with_tlv), (35, done(&v2(s, d)).1));
        // Incomplete: the total is known once the fixed part is in.
        assert_eq!(parse(&with_tlv[..20]), Ok(Parsed::Incomplete(Some(35))));
        // LOCAL: no address, whatever the block says.
        let mut local = v2(s, d);
        local[12] = 0x20;
        assert_eq!(done(&local).1.source, None);
        assert_eq!(
            done(&v2_local()),
            (
                16,
                Header {
                    version: 2,
                    source: None,
                    destination: None
                }
            )
        );
        assert_eq!(done(&v1_unknown()).1.source, None);
    }

    #[test]
    fn v2_refuses_bad_version_command_family_and_short_blocks() {
        let h = v2(
            "203.0.113.9:1".parse().unwrap(),
            "192.0.2.1:2".parse().unwrap(),
        );
        let mut bad = h.clone();
        bad[12] = 0x11;
        assert!(matches!(parse(&bad), Err(Error::Malformed(_))));
        bad[12] = 0x22;
        assert!(matches!(parse(&bad), Err(Error::Malformed(_))));
        let mut bad = h.clone();
        bad[13] = 0x41;
        assert!(matches!(parse(&bad), Err(Error::Malformed(_))));
        let mut bad = h[..16].to_vec();
        bad[15] = 4;
        bad.extend_from_slice(&[1, 2, 3, 4]);
        assert!(matches!(parse(&bad), Err(Error::Malformed(_))));
    }

    /// Hex as Varnish's scripts write it (whitespace between bytes).
    fn hex(text: &str) -> Vec<u8> {
        text.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    /// trunk/o00005.vtc's header: IPv4 217.70.181.33:60822 → 95.142.168.34:443, then a
    /// CRC32C TLV (`crc`), ALPN `h2`, authority `hocdet.net` and an SSL TLV with four
    /// sub-TLVs; `len`, `first` (the first TLV's type), `ssl_len` and `tail` as each case
    /// of the script changes them.
    fn o00005(len: &str, first: &str, crc: &str, ssl_len: &str, tail: &str) -> Vec<u8> {
        hex(&format!(
            "0d 0a 0d 0a 00 0d 0a 51 55 49 54 0a 21 11 00 {len}
             d9 46 b5 21 5f 8e a8 22 ed 96 01 bb
             {first} 00 04 {crc}
             01 00 02 68 32
             02 00 0a 68 6f 63 64 65 74 2e 6e 65 74
             20 00 {ssl_len} 01 00 00 00 00
             21 00 07 54 4c 53 76 31 2e 33
             25 00 05 45 43 32 35 36
             24 00 0a 52 53 41 2d 53 48 41 32 35 36
             23 00 16 41 45 41 44 2d 41 45 53 31 32 38 2d 47 43 4d 2d 53 48 41 32 35 36
             {tail}"
        ))
    }

    #[test]
    fn v2_tlvs_are_checked_whole_and_their_checksum_verified() {
        // The script's good checksum: accepted, the addresses read.
        let good = o00005("65", "03", "95 03 ee 75", "3d", "");
        let (len, h) = done(&good);
        assert_eq!(len, good.len());
        assert_eq!(h.source, Some("217.70.181.33:60822".parse().unwrap()));
        assert_eq!(h.destination, Some("95.142.168.34:443".parse().unwrap()));
        let malformed = |buf: &[u8]| match parse(buf) {
            Err(Error::Malformed(why)) => why,
            other => panic!("{other:?}"),
        };
        // "PROXY2: CRC error".
        assert!(malformed(&o00005("65", "03", "95 03 ee 74", "3d", "")).contains("CRC32C"));
        // "PROXY2: TLV Dribble bytes": two bytes after the last TLV.
        assert!(malformed(&o00005("67", "ff", "95 03 ee 74", "3d", "ff ff")).contains("left over"));
        // "PROXY2: TLV Length Error": the header ends inside the SSL TLV, then an SSL TLV
        // whose sub-TLVs run past its own length.
        assert!(malformed(&o00005("60", "ff", "95 03 ee 74", "3d", "")).contains("runs past"));
        assert!(malformed(&o00005("65", "ff", "95 03 ee 74", "3c", "")).contains("runs past"));
        // A CRC32C TLV of another size, an SSL TLV too short for its flags.
        let mut crc3 = v2("1.2.3.4:1".parse().unwrap(), "5.6.7.8:2".parse().unwrap());
        crc3[15] += 6;
        crc3.extend_from_slice(&[0x03, 0x00, 0x03, 1, 2, 3]);
        assert!(malformed(&crc3).contains("4 bytes"));
        // A LOCAL header's block is skipped unread, whatever it holds.
        let mut local = o00005("65", "ff", "95 03 ee 74", "3c", "");
        local[12] = 0x20;
        assert_eq!(done(&local).1.source, None);
    }

    #[test]
    fn crc32c_is_castagnoli() {
        // RFC 3720 appendix B.4's test vectors.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62A8_AB43);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn v1_writes_what_it_reads() {
        let s: SocketAddr = "[::ffff:203.0.113.9]:40000".parse().unwrap();
        let d: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(
            v1(s, d),
            b"PROXY TCP4 203.0.113.9 127.0.0.1 40000 8080\r\n".to_vec()
        );
        let s6: SocketAddr = "[2001:db8::9]:1".parse().unwrap();
        let text = v1(s6, d);
        assert_eq!(
            text,
            b"PROXY TCP6 2001:db8::9 ::ffff:127.0.0.1 1 8080\r\n".to_vec()
        );
        assert_eq!(done(&text).1.source, Some(s6));
    }
}
