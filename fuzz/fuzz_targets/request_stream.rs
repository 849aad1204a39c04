//! The stream scanner gives the same answer however the bytes are split across reads (the
//! first byte picks the split size), and never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::http::strict::{Limits, Scan, Scanner, Violation};

/// (heads seen, first violation) for `input` fed in pieces of `step` bytes, holding partial
/// heads as the gate does.
fn run(input: &[u8], step: usize) -> (usize, Option<Violation>) {
    let mut scanner = Scanner::new(Limits {
        max_request_line: 512,
        max_header_size: 2048,
        max_headers: 16,
        max_field_size: 1024,
        max_body_size: 1 << 20,
    });
    let mut held: Vec<u8> = Vec::new();
    let mut heads = 0;
    for piece in input.chunks(step.max(1)) {
        held.extend_from_slice(piece);
        while !held.is_empty() {
            match scanner.scan(&held) {
                Scan::Head(n, _) => {
                    heads += 1;
                    held.drain(..n);
                }
                Scan::Body(n) => {
                    assert!(n > 0 && n <= held.len());
                    held.drain(..n);
                }
                Scan::Incomplete => break,
                Scan::Reject(v) => return (heads, Some(v)),
            }
        }
    }
    (heads, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, input)) = data.split_first() else {
        return;
    };
    let whole = run(input, input.len());
    let split = run(input, usize::from(first % 16) + 1);
    // Limits on partial heads may refuse a little earlier when split; otherwise identical.
    if whole.1.is_none() && split.1.is_none() {
        assert_eq!(whole, split);
    } else if let (Some(a), Some(b)) = (whole.1, split.1) {
        assert_eq!(whole.0, split.0, "{a:?} vs {b:?}");
    }
});
