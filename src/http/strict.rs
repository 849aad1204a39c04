//! Strict HTTP/1.1 request framing (RFC 9112 §2–§7, RFC 9110 §5, §7.6.1), checked on the raw
//! bytes before hyper parses them. Pure: no I/O, no allocation; `server/gate.rs` feeds it.
//!
//! Why a second parser in front of hyper: hyper is lenient where a cache must not be. It
//! accepts `Transfer-Encoding: ,chunked`, a missing or duplicated `Host`, `Connection:
//! Content-Length`, bare LF line ends, and reports chunk-syntax errors only after the head was
//! handed to the application. Every message this module accepts is one that hyper (httparse)
//! parses with the same boundaries, so both always agree where a request ends; everything else
//! is refused before hyper sees a byte of it.
//!
//! [`check_head`] validates one complete request head; [`Scanner`] follows the byte stream of a
//! connection (heads, `Content-Length` bodies, chunked bodies with extensions and trailers) so
//! that the gate knows where each request begins.

/// Bounds on what one request may use. Defaults in `config::ServerConfig`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Request line (method, target, version) in bytes; longer → 414.
    pub max_request_line: usize,
    /// Whole head (request line and fields) in bytes; larger → 431. Also bounds trailers.
    pub max_header_size: usize,
    /// Field lines in a head; more → 431.
    pub max_headers: usize,
    /// Request body bytes (declared or chunked); more → 413.
    pub max_body_size: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_header_size: 32 * 1024,
            max_headers: 100,
            max_body_size: 1 << 30,
        }
    }
}

/// How rejections are grouped in counters (`client_reject_<class>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    RequestLine,
    Header,
    Host,
    Framing,
    HopByHop,
    Chunked,
    Limit,
}

macro_rules! violations {
    ($( $name:ident = $code:literal, $status:literal, $class:ident, $word:literal; )*) => {
        /// Why a request was refused. `as_str` is the `Cache-Status` detail and log word.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Violation { $( $name = $code, )* }

        impl Violation {
            /// Every violation, in code order.
            pub const ALL: &'static [Violation] = &[ $( Violation::$name, )* ];

            pub fn as_str(self) -> &'static str {
                match self { $( Violation::$name => $word, )* }
            }

            /// The status Shellac answers with.
            pub fn status(self) -> u16 {
                match self { $( Violation::$name => $status, )* }
            }

            pub fn class(self) -> Class {
                match self { $( Violation::$name => Class::$class, )* }
            }

            /// The inverse of `self as u8` (for passing a violation through an atomic).
            pub fn from_code(code: u8) -> Option<Violation> {
                match code { $( $code => Some(Violation::$name), )* _ => None }
            }
        }
    };
}

violations! {
    BadMethod = 1, 400, RequestLine, "bad-method";
    BadTarget = 2, 400, RequestLine, "bad-target";
    BadVersion = 3, 400, RequestLine, "bad-version";
    VersionNotSupported = 4, 505, RequestLine, "version-not-supported";
    BadRequestLine = 5, 400, RequestLine, "bad-request-line";
    BareLf = 6, 400, Header, "bare-lf";
    ObsFold = 7, 400, Header, "obs-fold";
    SpaceBeforeColon = 8, 400, Header, "space-before-colon";
    BadFieldName = 9, 400, Header, "bad-field-name";
    BadFieldValue = 10, 400, Header, "bad-field-value";
    MissingHost = 11, 400, Host, "missing-host";
    DuplicateHost = 12, 400, Host, "duplicate-host";
    BadHost = 13, 400, Host, "bad-host";
    LengthAndChunked = 14, 400, Framing, "content-length-and-transfer-encoding";
    BadContentLength = 15, 400, Framing, "bad-content-length";
    ConflictingContentLength = 16, 400, Framing, "conflicting-content-length";
    BadTransferEncoding = 17, 400, Framing, "bad-transfer-encoding";
    UnknownTransferCoding = 18, 501, Framing, "unknown-transfer-coding";
    TransferEncodingHttp10 = 19, 400, Framing, "transfer-encoding-in-http10";
    ConnectionNamesEndToEnd = 20, 400, HopByHop, "connection-names-end-to-end-field";
    BadConnection = 21, 400, HopByHop, "bad-connection";
    BadChunkSize = 22, 400, Chunked, "bad-chunk-size";
    BadChunkExtension = 23, 400, Chunked, "bad-chunk-extension";
    BadChunkData = 24, 400, Chunked, "bad-chunk-data";
    BadTrailer = 25, 400, Chunked, "bad-trailer";
    UriTooLong = 26, 414, Limit, "uri-too-long";
    HeaderTooLarge = 27, 431, Limit, "header-too-large";
    TooManyHeaders = 28, 431, Limit, "too-many-headers";
    BodyTooLarge = 29, 413, Limit, "body-too-large";
}

/// How the body of an accepted request is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (no Content-Length, no Transfer-Encoding, or `Content-Length: 0`).
    None,
    Length(u64),
    Chunked,
}

/// What the gate needs to know about an accepted head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub framing: Framing,
    /// `Upgrade` present, named in `Connection`, and no body: the connection may switch
    /// protocols right after this head.
    pub upgrade: bool,
}

/// RFC 9110 §5.6.2 tchar.
const fn tchar_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    t
}

static TCHAR: [bool; 256] = tchar_table();

#[inline]
fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// field-vchar / SP / HTAB (RFC 9110 §5.5): no CTL (NUL, CR, LF, ...) and no DEL.
const fn field_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i == 0x09 || (i >= 0x20 && i != 0x7f);
        i += 1;
    }
    t
}

static FIELD: [bool; 256] = field_table();

#[inline]
fn is_field_byte(b: u8) -> bool {
    FIELD[b as usize]
}

/// Index of the first byte from `from` on that is not a field byte (or `data.len()`). Eight
/// bytes at a time while none is a control byte or DEL (SWAR, as httparse does); the byte
/// that stops it (usually the CR) and HTAB are looked at one by one.
#[inline]
fn field_run(data: &[u8], mut j: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = data.get(j..j + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // Some byte < 0x20 (hasless), or some byte == 0x7f (haszero of w ^ 0x7f..).
        let low = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let del = (w ^ (ONES * 0x7f)).wrapping_sub(ONES) & !(w ^ (ONES * 0x7f)) & HIGH;
        if low | del != 0 {
            break;
        }
        j += 8;
    }
    while j < data.len() && is_field_byte(data[j]) {
        j += 1;
    }
    j
}

/// Request-target bytes: visible ASCII without the characters RFC 3986 never allows
/// unencoded and that path-confusion attacks rely on (`"`, `<`, `>`, `\`, `#`). `{`, `|`, `}`,
/// `^` and `` ` `` stay allowed: real clients send them unencoded in query strings.
const fn target_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0x21;
    while i < 0x7f {
        t[i] = !matches!(i as u8, b'"' | b'<' | b'>' | b'\\' | b'#');
        i += 1;
    }
    t
}

static TARGET: [bool; 256] = target_table();

/// reg-name characters other than `%` (RFC 3986 §3.2.2): unreserved and sub-delims.
const fn reg_name_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            );
        i += 1;
    }
    t
}

static REG_NAME: [bool; 256] = reg_name_table();

#[inline]
fn is_target_byte(b: u8) -> bool {
    TARGET[b as usize]
}

/// Fields a client may not list in `Connection` (it would make a proxy drop them): framing,
/// routing, identity, and cache-relevant end-to-end fields.
const END_TO_END: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "authorization",
    "cookie",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "via",
    "cache-control",
    "pragma",
    "range",
    "if-range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "content-type",
    "content-encoding",
    "accept-encoding",
    "vary",
    "origin",
    "referer",
    "user-agent",
    "expect",
    "date",
];

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// Elements of a `#rule` list, OWS-trimmed. Empty elements are kept (callers reject them).
fn list(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|b| *b == b',').map(trim_ows)
}

/// Validates one complete request head: `head` runs from the request line through the blank
/// line (`\r\n\r\n`) that ends it, without leading empty lines.
pub fn check_head(head: &[u8], limits: &Limits) -> Result<Head, Violation> {
    match parse_head(head, limits)? {
        Some((end, h)) if end == head.len() => Ok(h),
        Some(_) => Err(Violation::BadFieldValue),
        None => Err(Violation::BadRequestLine),
    }
}

/// Parses the head at the start of `data` in one pass: `Some((length, head))` once its blank
/// line is in `data`, `None` while it is incomplete (with every complete line already checked),
/// or the first rule it breaks.
pub fn parse_head(data: &[u8], limits: &Limits) -> Result<Option<(usize, Head)>, Violation> {
    let Some(first) = memchr::memchr(b'\n', data) else {
        return if data.len() > limits.max_request_line {
            Err(Violation::UriTooLong)
        } else {
            Ok(None)
        };
    };
    if first == 0 || data[first - 1] != b'\r' {
        return Err(Violation::BareLf);
    }
    if first - 1 > limits.max_request_line {
        return Err(Violation::UriTooLong);
    }
    let http10 = request_line(&data[..first - 1])?;
    let mut pos = first + 1;
    let mut fields = 0usize;
    let mut hosts = 0u32;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut te_lines = 0u32;
    let mut upgrade_field = false;
    let mut connection_upgrade = false;
    let end = loop {
        if pos > limits.max_header_size {
            return Err(Violation::HeaderTooLarge);
        }
        // The blank line ends the head.
        match data.get(pos..pos + 2) {
            Some(b"\r\n") => break pos + 2,
            Some([b'\n', _]) => return Err(Violation::BareLf),
            Some([b'\r', _]) => return Err(Violation::BadFieldName),
            None if data.get(pos) == Some(&b'\n') => return Err(Violation::BareLf),
            None => return Ok(None),
            Some(_) => {}
        }
        // Field name: tchar up to the colon.
        let i = data[pos..]
            .iter()
            .position(|b| !is_tchar(*b))
            .map_or(data.len(), |n| pos + n);
        match data.get(i) {
            Some(b':') if i > pos => {}
            Some(b' ' | b'\t') if i == pos => return Err(Violation::ObsFold),
            Some(b' ' | b'\t') => return Err(Violation::SpaceBeforeColon),
            None => return Ok(None),
            _ => return Err(Violation::BadFieldName),
        }
        let name = &data[pos..i];
        // Field value: field bytes up to CR LF.
        let j = field_run(data, i + 1);
        match data.get(j..j + 2) {
            Some(b"\r\n") => {}
            Some([b'\n', _]) => return Err(Violation::BareLf),
            None if j == data.len() || data[j] == b'\r' => return Ok(None),
            None if data[j] == b'\n' => return Err(Violation::BareLf),
            _ => return Err(Violation::BadFieldValue),
        }
        let raw = &data[i + 1..j];
        pos = j + 2;
        fields += 1;
        if fields > limits.max_headers {
            return Err(Violation::TooManyHeaders);
        }
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                let value = trim_ows(raw);
                hosts += 1;
                if hosts > 1 {
                    return Err(Violation::DuplicateHost);
                }
                if !valid_authority(value) {
                    return Err(Violation::BadHost);
                }
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                for element in list(trim_ows(raw)) {
                    let n = parse_length(element)?;
                    match length {
                        Some(prev) if prev != n => {
                            return Err(Violation::ConflictingContentLength);
                        }
                        _ => length = Some(n),
                    }
                }
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                te_lines += 1;
                chunked = transfer_encoding(trim_ows(raw))?;
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in list(trim_ows(raw)) {
                    if token.is_empty() || !token.iter().all(|b| is_tchar(*b)) {
                        return Err(Violation::BadConnection);
                    }
                    if END_TO_END
                        .iter()
                        .any(|f| f.as_bytes().eq_ignore_ascii_case(token))
                    {
                        return Err(Violation::ConnectionNamesEndToEnd);
                    }
                    if token.eq_ignore_ascii_case(b"upgrade") {
                        connection_upgrade = true;
                    }
                }
            }
            7 if name.eq_ignore_ascii_case(b"upgrade") => upgrade_field = true,
            _ => {}
        }
    };
    if end > limits.max_header_size {
        return Err(Violation::HeaderTooLarge);
    }
    if hosts == 0 && !http10 {
        return Err(Violation::MissingHost);
    }
    if te_lines > 0 {
        if http10 {
            return Err(Violation::TransferEncodingHttp10);
        }
        if te_lines > 1 {
            return Err(Violation::BadTransferEncoding);
        }
        if length.is_some() {
            return Err(Violation::LengthAndChunked);
        }
    }
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(n)) if n > limits.max_body_size => return Err(Violation::BodyTooLarge),
        (false, Some(0)) | (false, None) => Framing::None,
        (false, Some(n)) => Framing::Length(n),
    };
    Ok(Some((
        end,
        Head {
            framing,
            // Only a request without a body can switch protocols right after its head.
            upgrade: upgrade_field && connection_upgrade && framing == Framing::None,
        },
    )))
}

/// `method SP request-target SP HTTP-version`. Returns whether it is HTTP/1.0.
fn request_line(line: &[u8]) -> Result<bool, Violation> {
    let sp1 = line
        .iter()
        .position(|b| *b == b' ')
        .ok_or(Violation::BadRequestLine)?;
    let method = &line[..sp1];
    if method.is_empty() || !method.iter().all(|b| is_tchar(*b)) {
        return Err(Violation::BadMethod);
    }
    let rest = &line[sp1 + 1..];
    let sp2 = rest
        .iter()
        .position(|b| *b == b' ')
        .ok_or(Violation::BadRequestLine)?;
    let target = &rest[..sp2];
    let version = &rest[sp2 + 1..];
    check_target(target, method == b"CONNECT", method == b"OPTIONS")?;
    let http10 = match version {
        b"HTTP/1.1" => false,
        b"HTTP/1.0" => true,
        [b'H', b'T', b'T', b'P', b'/', d1, b'.', d2]
            if d1.is_ascii_digit() && d2.is_ascii_digit() =>
        {
            return Err(Violation::VersionNotSupported);
        }
        _ => return Err(Violation::BadVersion),
    };
    Ok(http10)
}

/// origin-form, absolute-form (http/https, no userinfo), authority-form for CONNECT,
/// asterisk-form for OPTIONS (RFC 9112 §3.2). Percent-escapes must be two hex digits.
fn check_target(target: &[u8], is_connect: bool, is_options: bool) -> Result<(), Violation> {
    if target.is_empty() {
        return Err(Violation::BadTarget);
    }
    let mut i = 0;
    while i < target.len() {
        let b = target[i];
        if b == b'%' {
            let ok = target
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
            if !ok {
                return Err(Violation::BadTarget);
            }
            i += 3;
        } else if is_target_byte(b) {
            i += 1;
        } else {
            return Err(Violation::BadTarget);
        }
    }
    if is_connect {
        return if valid_authority(target) && target.contains(&b':') {
            Ok(())
        } else {
            Err(Violation::BadTarget)
        };
    }
    match target[0] {
        b'/' => Ok(()),
        b'*' if target.len() == 1 && is_options => Ok(()),
        _ => {
            let lower_starts =
                |p: &[u8]| target.len() >= p.len() && target[..p.len()].eq_ignore_ascii_case(p);
            let rest = if lower_starts(b"http://") {
                &target[7..]
            } else if lower_starts(b"https://") {
                &target[8..]
            } else {
                return Err(Violation::BadTarget);
            };
            let end = rest
                .iter()
                .position(|b| matches!(b, b'/' | b'?'))
                .unwrap_or(rest.len());
            if valid_authority(&rest[..end]) {
                Ok(())
            } else {
                Err(Violation::BadTarget)
            }
        }
    }
}

/// `uri-host [ ":" port ]` (RFC 3986 §3.2.2, no userinfo): a bracketed IP literal or a
/// reg-name of unreserved / pct-encoded / sub-delims characters; port up to 5 digits.
pub fn valid_authority(a: &[u8]) -> bool {
    let host_end = if a.first() == Some(&b'[') {
        let Some(close) = a.iter().position(|b| *b == b']') else {
            return false;
        };
        let literal = &a[1..close];
        if literal.is_empty()
            || !literal
                .iter()
                .all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.' | b'v' | b'V'))
        {
            return false;
        }
        close + 1
    } else {
        // One pass over the reg-name; it ends at the port's colon or the end.
        let mut i = 0;
        while i < a.len() {
            let b = a[i];
            if REG_NAME[b as usize] {
                i += 1;
            } else if b == b'%'
                && a.get(i + 1..i + 3)
                    .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
            {
                i += 3;
            } else {
                break;
            }
        }
        if i == 0 {
            return false;
        }
        i
    };
    match &a[host_end..] {
        [] => true,
        [b':', port @ ..] => port.len() <= 5 && port.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// `1*DIGIT`, without overflow.
fn parse_length(v: &[u8]) -> Result<u64, Violation> {
    if v.is_empty() {
        return Err(Violation::BadContentLength);
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return Err(Violation::BadContentLength);
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or(Violation::BadContentLength)?;
    }
    // hyper refuses lengths this close to u64::MAX; refuse them first, as malformed.
    if n > u64::MAX / 2 {
        return Err(Violation::BadContentLength);
    }
    Ok(n)
}

/// A `Transfer-Encoding` value that is exactly `chunked` → Ok(true). Unknown but well-formed
/// codings → 501; anything else (empty elements, parameters, quotes, duplicates) → 400.
fn transfer_encoding(value: &[u8]) -> Result<bool, Violation> {
    let mut elements = 0;
    let mut unknown = false;
    for element in list(value) {
        elements += 1;
        if element.is_empty() || !element.iter().all(|b| is_tchar(*b)) {
            return Err(Violation::BadTransferEncoding);
        }
        if !element.eq_ignore_ascii_case(b"chunked") {
            unknown = true;
        }
    }
    if unknown {
        return Err(Violation::UnknownTransferCoding);
    }
    if elements != 1 {
        return Err(Violation::BadTransferEncoding);
    }
    Ok(true)
}

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
        }
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
        match parse_head(data, &self.limits) {
            Ok(Some((end, head))) => {
                self.searched = 0;
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
        if data.len() > self.limits.max_request_line && memchr::memchr(b'\n', data).is_none() {
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
    fn chunk_byte(&mut self, c: Chunk, b: u8) -> Result<Chunk, Violation> {
        use Chunk::*;
        let ext = |len: u16, next: Chunk| {
            if len >= MAX_CHUNK_EXT {
                Err(Violation::BadChunkExtension)
            } else {
                Ok(next)
            }
        };
        match c {
            Size { digits, value } => match b {
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
            },
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
            Done => Ok(Done),
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

/// Chunk data is consumed in bulk by `scan_chunked`, never byte by byte.
fn unreachable_data() -> Result<Chunk, Violation> {
    Err(Violation::BadChunkData)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Head, Violation> {
        check_head(text.as_bytes(), &Limits::default())
    }

    fn get(fields: &str) -> Result<Head, Violation> {
        head(&format!("GET / HTTP/1.1\r\nHost: a\r\n{fields}\r\n"))
    }

    #[test]
    fn plain_requests_pass() {
        assert_eq!(
            get("").unwrap(),
            Head {
                framing: Framing::None,
                upgrade: false
            }
        );
        assert_eq!(
            get("Content-Length: 5\r\n").unwrap().framing,
            Framing::Length(5)
        );
        assert_eq!(
            get("Content-Length: 5, 5\r\n").unwrap().framing,
            Framing::Length(5)
        );
        assert_eq!(
            get("transfer-encoding:  CHUNKED \r\n").unwrap().framing,
            Framing::Chunked
        );
        assert!(head("GET / HTTP/1.0\r\n\r\n").is_ok());
        assert!(head("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").is_ok());
        assert!(head("GET http://a.example:8080/x?y HTTP/1.1\r\nHost: b\r\n\r\n").is_ok());
        assert!(head("GET /a%2Fb?c={d}|e HTTP/1.1\r\nHost: [::1]:80\r\n\r\n").is_ok());
        assert!(head("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n").is_ok());
        assert!(
            get("X-Obs: caf\u{e9}\r\n").is_ok(),
            "obs-text in values is allowed"
        );
        assert!(
            get("Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n")
                .unwrap()
                .upgrade
        );
    }

    #[test]
    fn framing_attacks_are_refused() {
        use Violation::*;
        for (fields, want) in [
            (
                "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n",
                LengthAndChunked,
            ),
            ("Content-Length: +2\r\n", BadContentLength),
            ("Content-Length: 0x2\r\n", BadContentLength),
            ("Content-Length: \r\n", BadContentLength),
            ("Content-Length: 1 2\r\n", BadContentLength),
            ("Content-Length: 1, 2\r\n", ConflictingContentLength),
            (
                "Content-Length: 1\r\nContent-Length: 2\r\n",
                ConflictingContentLength,
            ),
            (
                "Content-Length: 99999999999999999999999\r\n",
                BadContentLength,
            ),
            ("Content-Length: 2,\r\n", BadContentLength),
            ("Transfer-Encoding: ,chunked\r\n", BadTransferEncoding),
            ("Transfer-Encoding: chunked,\r\n", BadTransferEncoding),
            (
                "Transfer-Encoding: chunked, chunked\r\n",
                BadTransferEncoding,
            ),
            ("Transfer-Encoding: \"chunked\"\r\n", BadTransferEncoding),
            ("Transfer-Encoding: chunked;q=1\r\n", BadTransferEncoding),
            (
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                BadTransferEncoding,
            ),
            (
                "Transfer-Encoding: gzip, chunked\r\n",
                UnknownTransferCoding,
            ),
            ("Transfer-Encoding: identity\r\n", UnknownTransferCoding),
            ("Transfer-Encoding: chunk\r\n", UnknownTransferCoding),
            ("Transfer-Encoding: \r\n", BadTransferEncoding),
            ("Transfer-Encoding : chunked\r\n", SpaceBeforeColon),
            ("Transfer-Encoding:\x0bchunked\r\n", BadFieldValue),
            ("Transfer-Encoding: chunked\rX: y\r\n", BadFieldValue),
            ("X: y\r\n Transfer-Encoding: chunked\r\n", ObsFold),
            ("\tX: y\r\n", ObsFold),
            (": y\r\n", BadFieldName),
            ("X y: z\r\n", SpaceBeforeColon),
            ("X\x00: z\r\n", BadFieldName),
            ("X: a\x00b\r\n", BadFieldValue),
            ("X: a\x7fb\r\n", BadFieldValue),
            ("Host: b\r\n", DuplicateHost),
            ("Connection: Content-Length\r\n", ConnectionNamesEndToEnd),
            ("Connection: close, host\r\n", ConnectionNamesEndToEnd),
            ("Connection: X-Forwarded-For\r\n", ConnectionNamesEndToEnd),
            ("Connection: a b\r\n", BadConnection),
            ("Connection: ,\r\n", BadConnection),
        ] {
            assert_eq!(get(fields), Err(want), "{fields:?}");
        }
        assert_eq!(
            head("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(TransferEncodingHttp10)
        );
    }

    #[test]
    fn request_line_and_host_rules() {
        use Violation::*;
        for (text, want) in [
            ("GET / HTTP/1.1\r\n\r\n", MissingHost),
            ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", BadHost),
            ("GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", BadHost),
            ("GET / HTTP/1.1\r\nHost: \r\n\r\n", BadHost),
            ("GET / HTTP/1.1\r\nHost: a:x\r\n\r\n", BadHost),
            ("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", BadMethod),
            (" GET / HTTP/1.1\r\nHost: a\r\n\r\n", BadMethod),
            ("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", BadVersion),
            ("GET / http/1.1\r\nHost: a\r\n\r\n", BadVersion),
            ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", VersionNotSupported),
            ("GET / HTTP/1.2\r\nHost: a\r\n\r\n", VersionNotSupported),
            ("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET /%4 HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET a HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET * HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET /\u{e9} HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
            ("GET / HTTP/1.1\r\nHost: a\r\nX\r\n\r\n", BadFieldName),
        ] {
            assert_eq!(head(text), Err(want), "{text:?}");
        }
    }

    #[test]
    fn authorities() {
        for ok in [
            &b"a"[..],
            b"a.example:8080",
            b"a:",
            b"a%20b:80",
            b"127.0.0.1",
            b"[::1]",
            b"[::1]:443",
            b"xn--bcher-kva.example",
        ] {
            assert!(valid_authority(ok), "{}", String::from_utf8_lossy(ok));
        }
        for bad in [
            &b""[..],
            b":80",
            b"a:123456",
            b"a:x",
            b"a b",
            b"a@b",
            b"a/b",
            b"[]",
            b"[::1]x",
            b"[::1",
            b"a%2",
            b"a:80:80",
        ] {
            assert!(!valid_authority(bad), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn limits() {
        let limits = Limits {
            max_request_line: 32,
            max_header_size: 128,
            max_headers: 3,
            max_body_size: 10,
        };
        let check = |t: &str| check_head(t.as_bytes(), &limits);
        assert_eq!(
            check(&format!(
                "GET /{} HTTP/1.1\r\nHost: a\r\n\r\n",
                "x".repeat(40)
            )),
            Err(Violation::UriTooLong)
        );
        assert_eq!(
            check("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
            Err(Violation::TooManyHeaders)
        );
        assert_eq!(
            check(&format!(
                "GET / HTTP/1.1\r\nHost: a\r\nA: {}\r\n\r\n",
                "x".repeat(120)
            )),
            Err(Violation::HeaderTooLarge)
        );
        assert_eq!(
            check("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n"),
            Err(Violation::BodyTooLarge)
        );
        let mut s = Scanner::new(limits);
        assert_eq!(
            s.scan(b"GET /xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
            Scan::Reject(Violation::UriTooLong)
        );
        let mut s = Scanner::new(limits);
        let chunked = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(s.scan(chunked), Scan::Head(..)));
        assert_eq!(s.scan(b"6\r\nabcdef\r\n"), Scan::Body(11));
        assert_eq!(s.scan(b"5\r\n"), Scan::Body(1));
        assert_eq!(s.scan(b"\r\n"), Scan::Reject(Violation::BodyTooLarge));
    }

    /// Runs a whole stream through a scanner, one byte at a time if `bytewise`, holding partial
    /// heads like the gate does. Returns the heads seen and the first violation.
    fn stream(input: &[u8], bytewise: bool) -> (usize, Option<Violation>) {
        let mut s = Scanner::new(Limits::default());
        let mut held: Vec<u8> = Vec::new();
        let mut heads = 0;
        let step = if bytewise { 1 } else { input.len().max(1) };
        for piece in input.chunks(step) {
            held.extend_from_slice(piece);
            loop {
                match s.scan(&held) {
                    Scan::Head(n, _) => {
                        heads += 1;
                        held.drain(..n);
                    }
                    Scan::Body(n) => {
                        held.drain(..n);
                    }
                    Scan::Incomplete => break,
                    Scan::Reject(v) => return (heads, Some(v)),
                }
                if held.is_empty() {
                    break;
                }
            }
        }
        (heads, None)
    }

    #[test]
    fn chunked_bodies() {
        let ok = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
            5;ext=1;q=\"a\\\"b\";flag\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n\
            GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for bytewise in [false, true] {
            assert_eq!(stream(ok, bytewise), (2, None));
        }
        let prefix = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        for (body, want) in [
            ("5\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
            ("5 \r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
            ("+5\r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
            ("0x5\r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
            ("\r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
            ("11111111111111111\r\n", Violation::BadChunkSize),
            ("5 ;a\r\nhello\r\n0\r\n\r\n", Violation::BadChunkSize),
            ("5;\r\nhello\r\n0\r\n\r\n", Violation::BadChunkExtension),
            ("5;a b\r\nhello\r\n0\r\n\r\n", Violation::BadChunkExtension),
            (
                "5;a=\"b\r\nhello\r\n0\r\n\r\n",
                Violation::BadChunkExtension,
            ),
            (
                "5;a=\x01\r\nhello\r\n0\r\n\r\n",
                Violation::BadChunkExtension,
            ),
            ("5\r\nhelloX\r\n0\r\n\r\n", Violation::BadChunkData),
            ("5\r\nhello\n0\r\n\r\n", Violation::BadChunkData),
            ("5\r\nhello\r\n0\r\n X: y\r\n\r\n", Violation::BadTrailer),
            ("5\r\nhello\r\n0\r\nX : y\r\n\r\n", Violation::BadTrailer),
            ("5\r\nhello\r\n0\r\nX: \x00\r\n\r\n", Violation::BadTrailer),
            ("5\r\nhello\r\n0\r\n\rX", Violation::BadTrailer),
        ] {
            let input = format!("{prefix}{body}");
            for bytewise in [false, true] {
                assert_eq!(
                    stream(input.as_bytes(), bytewise),
                    (1, Some(want)),
                    "{body:?} bytewise={bytewise}"
                );
            }
        }
        let long_ext = format!("{prefix}1;a={}\r\nx\r\n0\r\n\r\n", "b".repeat(2000));
        assert_eq!(
            stream(long_ext.as_bytes(), false),
            (1, Some(Violation::BadChunkExtension))
        );
    }

    #[test]
    fn stream_boundaries() {
        // Content-Length bodies are skipped exactly; leading empty lines are allowed.
        let input = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 26\r\n\r\n\
            GET /smuggled HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(stream(input, false), (2, None));
        assert_eq!(stream(input, true), (2, None));
        assert_eq!(
            stream(
                b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\nHost: a\n\n",
                false
            ),
            (1, Some(Violation::BareLf))
        );
        assert_eq!(
            stream(b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", true),
            (1, None)
        );
        assert_eq!(stream(b"\n", false), (0, Some(Violation::BareLf)));
    }

    #[test]
    fn field_run_matches_the_byte_rule() {
        // Deterministic pseudo-random bytes, biased towards printable ones.
        let mut x: u32 = 12345;
        for _ in 0..2000 {
            let len = (x % 40) as usize;
            let mut v = Vec::new();
            for _ in 0..len {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let r = (x >> 16) as u8;
                v.push(if r.is_multiple_of(5) {
                    r
                } else {
                    b'a' + r % 26
                });
            }
            for from in 0..=len.min(3) {
                let want = v[from..]
                    .iter()
                    .position(|b| !is_field_byte(*b))
                    .map_or(len, |n| from + n);
                assert_eq!(field_run(&v, from), want, "{v:?} from {from}");
            }
        }
    }

    #[test]
    fn violation_codes_round_trip() {
        for v in Violation::ALL {
            assert_eq!(Violation::from_code(*v as u8), Some(*v));
            assert!((400..600).contains(&v.status()));
        }
        assert_eq!(Violation::from_code(0), None);
    }
}
