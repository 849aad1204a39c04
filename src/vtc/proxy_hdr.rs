//! A client's `-proxy1 "SRC DST"` / `-proxy2 "SRC DST"`: the PROXY protocol header
//! varnishtest's client sends first on each connection (vtc_client.c, vtc_proxy.c), written
//! here from HAProxy's specification rather than taken from Shellac's own writer, so the
//! runner checks Shellac's reader independently. `SRC` and `DST` are `IP:PORT` (`[IPv6]:PORT`);
//! both of one family, as varnishtest requires.

use std::net::{IpAddr, SocketAddr};

use super::context::{Halt, Step, skip};

/// The header `-proxy1` (`version` 1) or `-proxy2` (2) sends for `arg`.
pub fn header(version: u8, arg: &str) -> Step<Vec<u8>> {
    let words: Vec<&str> = arg.split_whitespace().collect();
    let (src, dst) = match words[..] {
        [s, d] => (addr(s)?, addr(d)?),
        [_, _, ref extra @ ..] => {
            return skip(format!(
                "-proxy{version} {}: TLVs in the client's PROXY header",
                extra.join(" ")
            ));
        }
        _ => {
            return Err(Halt::Fail(format!(
                "-proxy{version}: needs \"SRC DST\", got {arg:?}"
            )));
        }
    };
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(Halt::Fail(format!(
            "-proxy{version}: {src} and {dst} are of different families"
        )));
    }
    Ok(if version == 1 {
        v1(src, dst)
    } else {
        v2(src, dst)
    })
}

fn addr(text: &str) -> Step<SocketAddr> {
    text.parse()
        .map_err(|_| Halt::Fail(format!("PROXY header address {text:?} is not IP:PORT")))
}

fn v1(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let family = if src.is_ipv4() { "TCP4" } else { "TCP6" };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        src.ip(),
        dst.ip(),
        src.port(),
        dst.port()
    )
    .into_bytes()
}

fn v2(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let mut out = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    // Version 2, PROXY; then the family over STREAM and the address block's length.
    out.push(0x21);
    let octets = |ip: IpAddr| match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let (family, len) = if src.is_ipv4() {
        (0x11, 12u16)
    } else {
        (0x21, 36)
    };
    out.push(family);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend(octets(src.ip()));
    out.extend(octets(dst.ip()));
    out.extend_from_slice(&src.port().to_be_bytes());
    out.extend_from_slice(&dst.port().to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_as_varnishtest_writes_them() {
        assert_eq!(
            header(1, "1.2.3.4:1234 5.6.7.8:5678").unwrap(),
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1234 5678\r\n"
        );
        assert_eq!(
            header(1, "[1:f::2]:1234 [5:a::8]:5678").unwrap(),
            b"PROXY TCP6 1:f::2 5:a::8 1234 5678\r\n"
        );
        let v2 = header(2, "1.2.3.4:2314 5.6.7.8:2828").unwrap();
        assert_eq!(&v2[12..16], &[0x21, 0x11, 0, 12]);
        assert_eq!(&v2[16..], &[1, 2, 3, 4, 5, 6, 7, 8, 0x09, 0x0a, 0x0b, 0x0c]);
        let v6 = header(
            2,
            "[102:304:506::d0e:f10]:2314 [8182:8384:8586::8d8e:8f80]:2828",
        )
        .unwrap();
        assert_eq!(v6.len(), 16 + 36);
        assert!(matches!(
            header(2, "1.2.3.4:1 5.6.7.8:2 alpn=h2"),
            Err(Halt::Skip(_))
        ));
        assert!(matches!(header(1, "1.2.3.4:1 [::1]:2"), Err(Halt::Fail(_))));
    }
}
