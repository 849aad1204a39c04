//! Following one connection's request stream: where each head starts and ends, and the
//! bodies between them — `Content-Length` skipped exactly, chunked bodies checked byte by byte
//! (sizes, extensions, data framing, trailers) against RFC 9112 §7.1.

use super::tokens::{is_field_byte, is_tchar};
use super::{Framing, Head, Limits, Parts, Violation, parse_head_into, partial_line_too_long};

/// Where the scanner is in a chunked body (RFC 9112 §7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Hex digits of a chunk size (`digits` so far).
    Size {
        digits: u8,
        value: u64,
    },
    /// `;name` of a chunk extension; `len` counts the whole extension part of the line.
    ExtName {
        len: u16,
        started: bool,
    },
    ExtValueStart {
        len: u16,
    },
    ExtToken {
        len: u16,
    },
    ExtQuoted {
        len: u16,
        escaped: bool,
    },
    ExtAfterQuote {
        len: u16,
    },
    SizeLf {
        value: u64,
    },
    Data(u64),
    DataCr,
    DataLf,
    /// Start of a trailer line (or of the final blank line).
    TrailerStart,
    TrailerName,
    TrailerValue,
    TrailerLf,
    EndLf,
    /// The blank line after the trailers ended the message (never stored).
    Done,
}

/// Bytes of chunk extensions one chunk line may carry.
const MAX_CHUNK_EXT: u16 = 1024;

/// Empty lines (CRLF) tolerated before a request line (RFC 9112 §2.2 asks for at least one).
const MAX_EMPTY_LINES: u8 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Length(u64),
    Chunked(Chunk),
}

/// What [`Scanner::scan`] found at the start of the bytes it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// A complete, valid head of this many bytes (leading empty lines included).
    Head(usize, Head),
    /// This many body bytes (or empty lines between requests), all valid.
    Body(usize),
    /// A head starts here but is not complete: call again with these bytes and more.
    Incomplete,
    /// The bytes here break the rules.
    Reject(Violation),
}

/// Follows one connection's request stream. Between calls it only remembers where it is
/// (head or body, chunk state, counts); a partial head must be passed again, whole, with the
/// bytes that follow it.
#[derive(Clone, Debug)]
pub struct Scanner {
    limits: Limits,
    state: State,
    /// In `Head`: bytes of the partial head already searched for its end.
    searched: usize,
    /// Chunked body bytes so far (for `max_body_size`), trailer bytes so far.
    body: u64,
    trailer: usize,
    /// Size of the chunk whose extensions are being read.
    pending: u64,
    /// Empty lines seen before the current request line.
    empty_lines: u8,
    /// Where the last accepted head's parts are, when kept ([`Scanner::keep_parts`]).
    parts: Option<Box<Parts>>,
}

impl Scanner {
    pub fn new(limits: Limits) -> Scanner {
        Scanner {
            limits,
            state: State::Head,
            searched: 0,
            body: 0,
            trailer: 0,
            pending: 0,
            empty_lines: 0,
            parts: None,
        }
    }

    /// From now on, notes where each accepted head's parts are ([`Scanner::parts`]).
    pub fn keep_parts(&mut self) {
        self.parts.get_or_insert_with(Box::default);
    }

    /// Where the parts of the head the last [`Scan::Head`] accepted are (with
    /// [`Scanner::keep_parts`]): offsets into that head's bytes.
    pub fn parts(&self) -> Option<&Parts> {
        self.parts.as_deref()
    }

    /// True between messages or inside a head (not in a body).
    pub fn at_head(&self) -> bool {
        self.state == State::Head
    }

    /// Examines `data` (which must start where the previous call stopped, or with the same
    /// partial head again) and says what its first bytes are.
    pub fn scan(&mut self, data: &[u8]) -> Scan {
        if data.is_empty() {
            return Scan::Incomplete;
        }
        match self.state {
            State::Head => self.scan_head(data),
            State::Length(left) => {
                let n = left.min(data.len() as u64);
                self.state = if n == left {
                    State::Head
                } else {
                    State::Length(left - n)
                };
                Scan::Body(n as usize)
            }
            State::Chunked(c) => self.scan_chunked(c, data),
        }
    }

    fn scan_head(&mut self, data: &[u8]) -> Scan {
        // Empty lines before a request line are ignored (RFC 9112 §2.2), CRLF only.
        if data[0] == b'\r' || data[0] == b'\n' {
            return match data {
                [b'\r', b'\n', ..] => {
                    // A few are tolerated (clients that end a body with an extra CRLF); an
                    // endless stream of them is not a request.
                    self.empty_lines += 1;
                    if self.empty_lines > MAX_EMPTY_LINES {
                        return Scan::Reject(Violation::BadRequestLine);
                    }
                    self.searched = 0;
                    Scan::Body(2)
                }
                [b'\r'] => Scan::Incomplete,
                _ => Scan::Reject(Violation::BareLf),
            };
        }
        if !is_tchar(data[0]) {
            // Not even the start of a method (binary garbage, a TLS hello): refuse at once.
            return Scan::Reject(Violation::BadMethod);
        }
        // A partial head is parsed again only once a new line has arrived in it.
        let from = self.searched;
        if from > 0 && memchr::memchr(b'\n', &data[from..]).is_none() {
            return self.incomplete(data);
        }
        match parse_head_into(data, &self.limits, self.parts.as_deref_mut()) {
            Ok(Some((end, head))) => {
                self.searched = 0;
                self.empty_lines = 0;
                self.state = match head.framing {
                    Framing::None => State::Head,
                    Framing::Length(n) => State::Length(n),
                    Framing::Chunked => {
                        self.body = 0;
                        self.trailer = 0;
                        State::Chunked(Chunk::Size {
                            digits: 0,
                            value: 0,
                        })
                    }
                };
                Scan::Head(end, head)
            }
            Ok(None) => self.incomplete(data),
            Err(v) => Scan::Reject(v),
        }
    }

    /// A head not complete yet: remember how far it was searched, enforce the size limits.
    fn incomplete(&mut self, data: &[u8]) -> Scan {
        self.searched = data.len();
        if partial_line_too_long(data, self.limits.max_request_line)
            && memchr::memchr(b'\n', data).is_none()
        {
            return Scan::Reject(Violation::UriTooLong);
        }
        if data.len() > self.limits.max_header_size {
            return Scan::Reject(Violation::HeaderTooLarge);
        }
        Scan::Incomplete
    }

    fn scan_chunked(&mut self, mut c: Chunk, data: &[u8]) -> Scan {
        let mut i = 0;
        while i < data.len() {
            if let Chunk::Data(left) = c {
                let n = left.min((data.len() - i) as u64);
                i += n as usize;
                c = if n == left {
                    Chunk::DataCr
                } else {
                    Chunk::Data(left - n)
                };
                continue;
            }
            match self.chunk_byte(c, data[i]) {
                Ok(Chunk::Done) => {
                    self.state = State::Head;
                    return Scan::Body(i + 1);
                }
                Ok(next) => {
                    c = next;
                    i += 1;
                }
                Err(v) => {
                    self.state = State::Chunked(c);
                    return if i > 0 {
                        Scan::Body(i)
                    } else {
                        Scan::Reject(v)
                    };
                }
            }
        }
        self.state = State::Chunked(c);
        Scan::Body(i)
    }

    /// One byte of chunk framing (everything but chunk data).
    #[inline]
    fn chunk_byte(&mut self, c: Chunk, b: u8) -> Result<Chunk, Violation> {
        use Chunk::*;
        match c {
            Size { digits, value } => self.size_byte(digits, value, b),
            ExtName { .. }
            | ExtValueStart { .. }
            | ExtToken { .. }
            | ExtQuoted { .. }
            | ExtAfterQuote { .. } => self.extension_byte(c, b),
            SizeLf { value } => match b {
                b'\n' if value == 0 => Ok(TrailerStart),
                b'\n' => Ok(Data(value)),
                _ => Err(Violation::BadChunkSize),
            },
            Data(_) => unreachable_data(),
            DataCr => match b {
                b'\r' => Ok(DataLf),
                _ => Err(Violation::BadChunkData),
            },
            DataLf => match b {
                b'\n' => Ok(Size {
                    digits: 0,
                    value: 0,
                }),
                _ => Err(Violation::BadChunkData),
            },
            TrailerStart | TrailerName | TrailerValue | TrailerLf | EndLf => {
                self.trailer_framing(c, b)
            }
            Done => Ok(Done),
        }
    }

    /// One byte of a chunk size line after `digits` hex digits of `value`.
    #[inline]
    fn size_byte(&mut self, digits: u8, value: u64, b: u8) -> Result<Chunk, Violation> {
        use Chunk::*;
        match b {
            b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                if digits >= 16 || value > (u64::MAX >> 4) {
                    return Err(Violation::BadChunkSize);
                }
                Ok(Size {
                    digits: digits + 1,
                    value: value * 16 + d,
                })
            }
            b';' if digits > 0 => {
                self.chunk_size(value)?;
                Ok(ExtName {
                    len: 1,
                    started: false,
                })
            }
            b'\r' if digits > 0 => {
                self.chunk_size(value)?;
                Ok(SizeLf { value })
            }
            _ => Err(Violation::BadChunkSize),
        }
    }

    /// One byte of a chunk extension (`;name`, `;name=token`, `;name="quoted"`), at most
    /// [`MAX_CHUNK_EXT`] bytes of them on one line.
    #[inline]
    fn extension_byte(&mut self, c: Chunk, b: u8) -> Result<Chunk, Violation> {
        use Chunk::*;
        match c {
            ExtName { len, started } => match b {
                _ if is_tchar(b) => ext(
                    len,
                    ExtName {
                        len: len + 1,
                        started: true,
                    },
                ),
                b'=' if started => ext(len, ExtValueStart { len: len + 1 }),
                b';' if started => ext(
                    len,
                    ExtName {
                        len: len + 1,
                        started: false,
                    },
                ),
                b'\r' if started => Ok(SizeLf {
                    value: self.pending,
                }),
                _ => Err(Violation::BadChunkExtension),
            },
            ExtValueStart { len } => match b {
                b'"' => ext(
                    len,
                    ExtQuoted {
                        len: len + 1,
                        escaped: false,
                    },
                ),
                _ if is_tchar(b) => ext(len, ExtToken { len: len + 1 }),
                _ => Err(Violation::BadChunkExtension),
            },
            ExtToken { len } => match b {
                _ if is_tchar(b) => ext(len, ExtToken { len: len + 1 }),
                b';' => ext(
                    len,
                    ExtName {
                        len: len + 1,
                        started: false,
                    },
                ),
                b'\r' => Ok(SizeLf {
                    value: self.pending,
                }),
                _ => Err(Violation::BadChunkExtension),
            },
            ExtQuoted { len, escaped } => match b {
                // quoted-pair: HTAB / SP / VCHAR / obs-text
                _ if escaped && (b == b'\t' || (b >= 0x20 && b != 0x7f)) => ext(
                    len,
                    ExtQuoted {
                        len: len + 1,
                        escaped: false,
                    },
                ),
                b'\\' if !escaped => ext(
                    len,
                    ExtQuoted {
                        len: len + 1,
                        escaped: true,
                    },
                ),
                b'"' if !escaped => ext(len, ExtAfterQuote { len: len + 1 }),
                // qdtext
                _ if !escaped && (b == b'\t' || (b >= 0x20 && b != 0x7f)) => ext(
                    len,
                    ExtQuoted {
                        len: len + 1,
                        escaped: false,
                    },
                ),
                _ => Err(Violation::BadChunkExtension),
            },
            ExtAfterQuote { len } => match b {
                b';' => ext(
                    len,
                    ExtName {
                        len: len + 1,
                        started: false,
                    },
                ),
                b'\r' => Ok(SizeLf {
                    value: self.pending,
                }),
                _ => Err(Violation::BadChunkExtension),
            },
            _ => Err(Violation::BadChunkExtension),
        }
    }

    /// One byte of the trailer section and the blank line that ends the message.
    #[inline]
    fn trailer_framing(&mut self, c: Chunk, b: u8) -> Result<Chunk, Violation> {
        use Chunk::*;
        match c {
            TrailerStart => match b {
                b'\r' => Ok(EndLf),
                _ if is_tchar(b) => self.trailer_byte(TrailerName),
                _ => Err(Violation::BadTrailer),
            },
            TrailerName => match b {
                _ if is_tchar(b) => self.trailer_byte(TrailerName),
                b':' => self.trailer_byte(TrailerValue),
                _ => Err(Violation::BadTrailer),
            },
            TrailerValue => match b {
                b'\r' => self.trailer_byte(TrailerLf),
                _ if is_field_byte(b) => self.trailer_byte(TrailerValue),
                _ => Err(Violation::BadTrailer),
            },
            TrailerLf => match b {
                b'\n' => self.trailer_byte(TrailerStart),
                _ => Err(Violation::BadTrailer),
            },
            EndLf => match b {
                b'\n' => Ok(Done),
                _ => Err(Violation::BadTrailer),
            },
            _ => Err(Violation::BadTrailer),
        }
    }

    /// A chunk of `size` bytes is announced: remember it and check the body limit.
    fn chunk_size(&mut self, size: u64) -> Result<(), Violation> {
        self.body = self.body.saturating_add(size);
        if self.body > self.limits.max_body_size {
            return Err(Violation::BodyTooLarge);
        }
        self.pending = size;
        Ok(())
    }

    fn trailer_byte(&mut self, next: Chunk) -> Result<Chunk, Violation> {
        self.trailer += 1;
        if self.trailer > self.limits.max_header_size {
            return Err(Violation::HeaderTooLarge);
        }
        Ok(next)
    }
}

/// Where a chunk extension's `len` bytes so far leave room for one more: `next`, else the
/// extension is too long.
#[inline]
fn ext(len: u16, next: Chunk) -> Result<Chunk, Violation> {
    if len >= MAX_CHUNK_EXT {
        Err(Violation::BadChunkExtension)
    } else {
        Ok(next)
    }
}

/// Chunk data is consumed in bulk by `scan_chunked`, never byte by byte.
fn unreachable_data() -> Result<Chunk, Violation> {
    Err(Violation::BadChunkData)
}
