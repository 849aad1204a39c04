//! The MP4 cutter never panics on any file: the first byte picks the time and whether the
//! input is a file of its own or the sample movie (`shellac::mp4::sample`, fast start or its
//! moov after its mdat, with `stco` or 64-bit `co64` chunk offsets) with bytes changed; the scan is asked again with more bytes as it
//! asks, as the delivery filter does, and a moov after the mdat is found and read through
//! the box headers after it, as the filter does from a stored body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::mp4::sample::{Options, movie_with};
use shellac::mp4::{Scan, cut, late, scan};

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let file = if first & 1 == 0 {
        let mut m = movie_with(Options {
            co64: first & 4 != 0,
            ..Options::small(first & 2 == 0)
        })
        .bytes();
        for edit in rest.chunks(3) {
            if let [a, b, v] = edit {
                let at = usize::from(u16::from_be_bytes([*a, *b])) % m.len();
                m[at] ^= *v;
            }
        }
        m
    } else {
        rest.to_vec()
    };
    let start = f64::from(first >> 3) / 10.0;
    let mut have = 16.min(file.len());
    for _ in 0..64 {
        match scan(&file[..have], 1 << 20) {
            Scan::More(n) if n > have && n <= file.len() => have = n,
            Scan::Ready(layout) => {
                if let Ok(Some(c)) = cut(&file[..have], &layout, start) {
                    assert!(c.from >= layout.mdat_data);
                }
                return;
            }
            Scan::MoovAfterMdat(l) => {
                let mut read = late::read_in(&file);
                if let Ok(moov) = l.find_moov(file.len() as u64, 1 << 20, &mut read)
                    && let Ok(Some(c)) = l.cut(&file[..have], &moov, start, None)
                {
                    assert!(c.from >= l.mdat_data && c.to <= l.mdat_end);
                }
                return;
            }
            _ => return,
        }
    }
});
