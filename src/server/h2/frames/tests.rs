//! The frame scanner on split input, and the watcher's budgets.

use super::scan::Event;
use super::*;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Every frame event of `bytes` fed in pieces of `step` bytes.
fn events(bytes: &[u8], step: usize) -> Vec<(bool, u8, u32, u32)> {
    let mut scan = Scan::default();
    let mut out = Vec::new();
    for piece in bytes.chunks(step) {
        let n = scan.feed(piece, |e| {
            match e {
                Event::Head(f) => out.push((true, f.kind, f.stream, f.code)),
                Event::Coded(f) => out.push((false, f.kind, f.stream, f.code)),
                Event::Settings(_) => {}
            }
            true
        });
        assert_eq!(n, piece.len());
    }
    out
}

#[test]
fn frames_are_found_whatever_the_split() {
    let mut bytes = frame(HEADERS, END_HEADERS, 1, b"abc");
    bytes.extend(frame(RST_STREAM, 0, 1, &8u32.to_be_bytes()));
    bytes.extend(frame(GOAWAY, 0, 0, &[0, 0, 0, 7, 0, 0, 0, 0xb, b'x']));
    bytes.extend(frame(DATA, END_STREAM, 3, &[0; 40]));
    let whole = events(&bytes, bytes.len());
    assert_eq!(
        whole,
        vec![
            (true, HEADERS, 1, 0),
            (false, HEADERS, 1, 0),
            (true, RST_STREAM, 1, 0),
            (false, RST_STREAM, 1, 8),
            (true, GOAWAY, 0, 0),
            (false, GOAWAY, 0, 0xb),
            (true, DATA, 3, 0),
            (false, DATA, 3, 0),
        ]
    );
    for step in 1..bytes.len() {
        assert_eq!(events(&bytes, step), whole, "split every {step} bytes");
    }
}

#[test]
fn boundaries_are_known_between_frames_only() {
    let mut scan = Scan::default();
    let f = frame(DATA, 0, 1, &[1, 2, 3, 4]);
    assert!(scan.at_boundary());
    scan.feed(&f[..5], |_| true);
    assert!(!scan.at_boundary());
    assert_eq!(scan.left_in_frame(), 0, "inside the header");
    scan.feed(&f[5..10], |_| true);
    assert_eq!(scan.left_in_frame(), 3);
    scan.feed(&f[10..], |_| true);
    assert!(scan.at_boundary());
}

#[test]
fn goaway_frames_name_the_last_stream_and_the_code() {
    let f = goaway(7, ENHANCE_YOUR_CALM);
    assert_eq!(f.to_vec(), frame(GOAWAY, 0, 0, &[0, 0, 0, 7, 0, 0, 0, 0xb]));
}
