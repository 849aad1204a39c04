//! What Varnish's `FetchError` records say of a backend body that fails while it is read
//! (`cache_http1_vfp.c`): the read error's text when the socket failed (`Resource
//! temporarily unavailable` for a read that timed out, `Connection reset by peer`), then the
//! body reader's words for its framing — `straight insufficient bytes` (a `Content-Length`
//! body that ended short), `chunked read err` / `chunked insufficient bytes` (a chunked one
//! that ended in a size line / in a chunk), `chunked header non-hex`, `chunked header no NL`,
//! `chunk end no NL`, `bogusly large chunk size`, `eof socket fail` (a body read to the end of
//! the connection whose read failed).

use std::io;

use http::HeaderMap;

/// How a backend response's body is delimited (Varnish's body status).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// `Content-Length`.
    Length,
    /// Read until the connection closes.
    #[default]
    Eof,
}

impl Framing {
    /// The framing a response head declares (checked by `framing.rs` before).
    pub fn of(headers: &HeaderMap) -> Framing {
        if headers.contains_key(http::header::TRANSFER_ENCODING) {
            Framing::Chunked
        } else if headers.contains_key(http::header::CONTENT_LENGTH) {
            Framing::Length
        } else {
            Framing::Eof
        }
    }
}

/// Why a body read failed, as far as Shellac can tell.
#[derive(Debug)]
pub enum Failure<'a> {
    /// No byte for `between_bytes_timeout`.
    Timeout,
    /// The read failed with this error (hyper's body decoder or the socket).
    Io(&'a io::Error),
    /// Some other failure (an origin kind's own stream).
    Other,
}

/// The `FetchError` records of `failure` on a body of `framing`, in Varnish's order.
pub fn words(framing: Framing, failure: Failure<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let socket = |out: &mut Vec<String>, text: String| out.push(text);
    match failure {
        Failure::Timeout => {
            let e = io::Error::from_raw_os_error(libc::EAGAIN);
            socket(&mut out, errno_text(&e));
            out.push(short(framing, false).into());
        }
        Failure::Io(e) if e.raw_os_error().is_some() => {
            socket(&mut out, errno_text(e));
            out.push(short(framing, false).into());
        }
        Failure::Io(e) => out.push(decoder(framing, e).into()),
        Failure::Other => out.push(short(framing, false).into()),
    }
    out
}

/// The reader's words for a body cut short: `in_chunk` when a chunked body ended inside a
/// chunk's data (else in a size line).
fn short(framing: Framing, in_chunk: bool) -> &'static str {
    match framing {
        Framing::Length => "straight insufficient bytes",
        Framing::Chunked if in_chunk => "chunked insufficient bytes",
        Framing::Chunked => "chunked read err",
        Framing::Eof => "eof socket fail",
    }
}

/// hyper's body decoder's errors (`proto/h1/decode.rs`) as Varnish's readers name them.
fn decoder(framing: Framing, e: &io::Error) -> &'static str {
    let text = e.to_string();
    if e.kind() == io::ErrorKind::UnexpectedEof {
        // hyper: "unexpected EOF during chunk size line" in a size line, its
        // `IncompleteBody` inside a chunk or a Content-Length body.
        return short(framing, !text.contains("chunk size line"));
    }
    if framing != Framing::Chunked {
        return short(framing, false);
    }
    if text.contains("overflow") {
        "bogusly large chunk size"
    } else if text.contains("Invalid chunk size LF") {
        "chunked header no NL"
    } else if text.contains("chunk body") {
        "chunk end no NL"
    } else if text.contains("chunk size line") || text.contains("chunk size linear") {
        "chunked header non-hex"
    } else {
        short(framing, false)
    }
}

/// An OS error's text as `strerror` gives it (without Rust's ` (os error N)`).
fn errno_text(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The I/O error under a hyper body error, if one is.
pub fn io_error(e: &hyper::Error) -> Option<&io::Error> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return Some(io);
        }
        source = s.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: io::ErrorKind, text: &str) -> io::Error {
        io::Error::new(kind, text)
    }

    #[test]
    fn framing_of_a_head() {
        let mut h = HeaderMap::new();
        assert_eq!(Framing::of(&h), Framing::Eof);
        h.insert(http::header::CONTENT_LENGTH, "3".parse().unwrap());
        assert_eq!(Framing::of(&h), Framing::Length);
        h.insert(http::header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        assert_eq!(Framing::of(&h), Framing::Chunked);
    }

    /// Varnish's words (cache_http1_vfp.c) for what hyper's decoder reports.
    #[test]
    fn body_failures_in_varnish_words() {
        let eof_in_size = err(
            io::ErrorKind::UnexpectedEof,
            "unexpected EOF during chunk size line",
        );
        let eof_in_data = err(
            io::ErrorKind::UnexpectedEof,
            "end of file before message length reached",
        );
        let non_hex = err(
            io::ErrorKind::InvalidInput,
            "Invalid chunk size line: Invalid Size",
        );
        let no_lf = err(io::ErrorKind::InvalidInput, "Invalid chunk size LF");
        let body_cr = err(io::ErrorKind::InvalidInput, "Invalid chunk body CR");
        let overflow = err(io::ErrorKind::InvalidData, "invalid chunk size: overflow");
        let cases: [(Framing, Failure<'_>, &[&str]); 9] = [
            (
                Framing::Length,
                Failure::Io(&eof_in_data),
                &["straight insufficient bytes"],
            ),
            (
                Framing::Chunked,
                Failure::Io(&eof_in_size),
                &["chunked read err"],
            ),
            (
                Framing::Chunked,
                Failure::Io(&eof_in_data),
                &["chunked insufficient bytes"],
            ),
            (
                Framing::Chunked,
                Failure::Io(&non_hex),
                &["chunked header non-hex"],
            ),
            (
                Framing::Chunked,
                Failure::Io(&no_lf),
                &["chunked header no NL"],
            ),
            (
                Framing::Chunked,
                Failure::Io(&body_cr),
                &["chunk end no NL"],
            ),
            (
                Framing::Chunked,
                Failure::Io(&overflow),
                &["bogusly large chunk size"],
            ),
            (
                Framing::Length,
                Failure::Timeout,
                &[
                    "Resource temporarily unavailable",
                    "straight insufficient bytes",
                ],
            ),
            (Framing::Eof, Failure::Other, &["eof socket fail"]),
        ];
        for (framing, failure, want) in cases {
            let what = format!("{framing:?} {failure:?}");
            assert_eq!(words(framing, failure), want, "{what}");
        }
        let reset = io::Error::from_raw_os_error(libc::ECONNRESET);
        assert_eq!(
            words(Framing::Chunked, Failure::Io(&reset)),
            ["Connection reset by peer", "chunked read err"]
        );
    }
}
