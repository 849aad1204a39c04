//! The mutation family of public request-smuggling scanners: each control byte 0x01–0x20, DEL,
//! 0xA0 and 0xFF placed before, inside and after the `Transfer-Encoding` name and value.
//! Whatever the byte, a request is either refused outright (nothing reaches the origin) or —
//! only for SP and HTAB around the value, which are legal whitespace — read as chunked.

use super::*;

fn mutate(b: u8, position: usize) -> Vec<u8> {
    let mut field = Vec::new();
    let name: &[u8] = b"Transfer-Encoding";
    let value: &[u8] = b"chunked";
    match position {
        0 => {
            field.push(b);
            field.extend_from_slice(name);
            field.extend_from_slice(b": ");
            field.extend_from_slice(value);
        }
        1 => {
            field.extend_from_slice(&name[..8]);
            field.push(b);
            field.extend_from_slice(&name[8..]);
            field.extend_from_slice(b": ");
            field.extend_from_slice(value);
        }
        2 => {
            field.extend_from_slice(name);
            field.push(b);
            field.extend_from_slice(b": ");
            field.extend_from_slice(value);
        }
        3 => {
            field.extend_from_slice(name);
            field.extend_from_slice(b":");
            field.push(b);
            field.extend_from_slice(value);
        }
        4 => {
            field.extend_from_slice(name);
            field.extend_from_slice(b": ");
            field.extend_from_slice(&value[..4]);
            field.push(b);
            field.extend_from_slice(&value[4..]);
        }
        _ => {
            field.extend_from_slice(name);
            field.extend_from_slice(b": ");
            field.extend_from_slice(value);
            field.push(b);
        }
    }
    field
}

const POSITIONS: [&str; 6] = [
    "before name",
    "inside name",
    "after name",
    "before value",
    "inside value",
    "after value",
];

fn bytes() -> Vec<u8> {
    (0x01..=0x20).chain([0x7f, 0xa0, 0xff]).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_encoding_mutations_with_content_length() {
    // CL.TE: whichever way the mutated field is read, the request is refused.
    let bench = Bench::start().await;
    let mut v = Vec::new();
    for b in bytes() {
        for (p, where_) in POSITIONS.iter().enumerate() {
            let mut send = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n".to_vec();
            send.extend_from_slice(&mutate(b, p));
            send.extend_from_slice(b"\r\n\r\n0\r\n\r\n");
            send.extend_from_slice(AFTER.as_bytes());
            v.push(Vector::refused(format!("0x{b:02x} {where_}"), send, 400));
        }
    }
    bench.run(&v).await;
    assert_eq!(bench.origin.count(), 0);
    assert!(!bench.origin.received().contains("/after"));
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_encoding_mutations_alone() {
    // TE only: legal whitespace around the value leaves plain chunked (forwarded, body
    // re-framed); every other mutation is refused and nothing reaches the origin.
    let bench = Bench::start().await;
    let mut v = Vec::new();
    let mut accepted = 0;
    for b in bytes() {
        for (p, where_) in POSITIONS.iter().enumerate() {
            let mut send = b"POST / HTTP/1.1\r\nHost: a\r\n".to_vec();
            send.extend_from_slice(&mutate(b, p));
            send.extend_from_slice(b"\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
            send.extend_from_slice(AFTER.as_bytes());
            let legal = matches!(b, b' ' | b'\t') && (p == 3 || p == 5);
            let name = format!("0x{b:02x} {where_}");
            v.push(if legal {
                accepted += 1;
                Vector::new(name, send).expect(&[200], 1)
            } else {
                Vector::refused(name, send, 400)
            });
        }
    }
    bench.run(&v).await;
    assert_eq!(bench.origin.count(), accepted);
    for i in 0..accepted {
        let r = bench.origin.request(i);
        assert!(r.starts_with("POST / HTTP/1.1\r\n"), "{r}");
        assert!(r.contains("hello"), "{r}");
    }
    assert!(!bench.origin.received().contains("/after"));
    bench.stop().await;
}
