//! The PROXY protocol reader: never panics, never claims more bytes than it was given, says
//! the same of every prefix of a header it accepts (incomplete, never an error), and reads
//! back exactly what the writers produce.
#![no_main]

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use libfuzzer_sys::fuzz_target;
use shellac::proxy_protocol::{Parsed, parse, v1, v2};

fuzz_target!(|data: &[u8]| {
    if let Ok(Parsed::Done { len, header }) = parse(data) {
        assert!(len <= data.len());
        assert!(header.version == 1 || header.version == 2);
        for n in 0..len {
            assert!(
                matches!(parse(&data[..n]), Ok(Parsed::Incomplete(_))),
                "a prefix of an accepted header must be incomplete"
            );
        }
        // The bytes after the header do not change it.
        assert_eq!(parse(&data[..len]), Ok(Parsed::Done { len, header }));
    }
    // Writers round-trip for addresses taken from the input.
    if data.len() >= 36 {
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        a.copy_from_slice(&data[..16]);
        b.copy_from_slice(&data[16..32]);
        let s = SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), u16::from_be_bytes([data[32], data[33]]));
        let d = SocketAddr::new(IpAddr::V6(Ipv6Addr::from(b)), u16::from_be_bytes([data[34], data[35]]));
        let canon = |x: SocketAddr| SocketAddr::new(x.ip().to_canonical(), x.port());
        for bytes in [v1(s, d), v2(s, d)] {
            match parse(&bytes) {
                Ok(Parsed::Done { len, header }) => {
                    assert_eq!(len, bytes.len());
                    let got = header.source.map(canon);
                    assert_eq!(got, Some(canon(s)));
                }
                other => panic!("{other:?} for {bytes:?}"),
            }
        }
    }
});
