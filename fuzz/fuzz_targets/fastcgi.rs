//! What a FastCGI application controls: `fastcgi::record::Reader` never panics, reads the same
//! records (the same STDOUT bytes, the same other records, the same error) whether the bytes
//! come at once or in pieces of any size, and never leaves more than one record in its buffer;
//! `fastcgi::head::parse` (the CGI head at the start of STDOUT) never panics, never claims more
//! bytes than it was given or than its size bound, answers "incomplete" at every line end
//! before a head it accepts, and is not changed by the bytes after that head.
//!
//! Input: the first byte picks the request id (1 or 2, so records of another request occur)
//! and how many piece sizes follow (0-15); then the piece sizes; the rest is the stream.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use shellac::fastcgi::head;
use shellac::fastcgi::record::{HEADER_LEN, MAX_CONTENT, ReadError, Reader, Record};

/// The most a record may leave in the reader's buffer: a whole record with full padding.
const MAX_RECORD: usize = HEADER_LEN + MAX_CONTENT + 255;

/// What a reader for `id` makes of `stream` handed over in pieces of the sizes in `pieces`
/// (cycled; all at once when empty): the STDOUT bytes joined, every other record (the empty
/// STDOUT that ends the stream among them) in order, and the error that stopped it.
fn read(stream: &[u8], pieces: &[u8], id: u16) -> (Vec<u8>, Vec<Record>, Option<ReadError>) {
    let mut reader = Reader::new(id);
    let mut buf = BytesMut::new();
    let (mut stdout, mut others) = (Vec::new(), Vec::new());
    let (mut at, mut k) = (0, 0);
    loop {
        loop {
            match reader.next(&mut buf) {
                Ok(Some(Record::Stdout(b))) if !b.is_empty() => stdout.extend_from_slice(&b),
                Ok(Some(r)) => others.push(r),
                Ok(None) => break,
                Err(e) => return (stdout, others, Some(e)),
            }
        }
        assert!(buf.len() <= MAX_RECORD, "{} bytes left in the buffer", buf.len());
        if at == stream.len() {
            return (stdout, others, None);
        }
        let n = match pieces.get(k % pieces.len().max(1)) {
            Some(&p) => (usize::from(p) + 1).min(stream.len() - at),
            None => stream.len() - at,
        };
        k += 1;
        buf.extend_from_slice(&stream[at..at + n]);
        at += n;
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let id = 1 + u16::from(first & 1);
    let n_pieces = usize::from(first >> 4).min(rest.len());
    let (pieces, stream) = rest.split_at(n_pieces);

    let whole = read(stream, &[], id);
    let split = read(stream, pieces, id);
    assert_eq!(whole, split, "pieces {pieces:?} read differently");

    // The CGI head, with bounds taken from the input.
    let stdout = &whole.0;
    let max_size = 16 + usize::from(pieces.first().copied().unwrap_or(255)) * 16;
    let max_fields = 1 + usize::from(pieces.get(1).copied().unwrap_or(99));
    if let Ok(Some((parsed, len))) = head::parse(stdout, max_size, max_fields) {
        assert!(len <= stdout.len() && len <= max_size);
        assert_eq!(
            head::parse(&stdout[..len], max_size, max_fields),
            Ok(Some((parsed, len))),
            "the bytes after the head changed it"
        );
        for (i, _) in stdout[..len].iter().enumerate().filter(|&(_, &b)| b == b'\n') {
            for cut in [i, i + 1] {
                if cut < len {
                    assert_eq!(
                        head::parse(&stdout[..cut], max_size, max_fields),
                        Ok(None),
                        "a prefix ({cut} bytes) of an accepted head must be incomplete"
                    );
                }
            }
        }
    }
});
