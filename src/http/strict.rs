//! Strict HTTP/1.1 request framing (RFC 9112 §2–§7, RFC 9110 §5, §7.6.1), checked on the raw
//! bytes before hyper parses them. Pure: no I/O, no allocation; `server/h1/scan.rs` feeds it.
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
    /// One field line (name, colon and value, without its CR LF) in bytes; longer → 431.
    pub max_field_size: usize,
    /// Request body bytes (declared or chunked); more → 413.
    pub max_body_size: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_header_size: 32 * 1024,
            max_headers: 100,
            max_field_size: 32 * 1024,
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

            /// The access-log / `shellac log` reason: `refused:` and the word.
            pub fn refused_reason(self) -> &'static str {
                match self { $( Violation::$name => concat!("refused:", $word), )* }
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
    // Not a parsing rule but policy, applied by the gate to a valid head: Shellac is no
    // forward proxy.
    ConnectNotSupported = 30, 405, RequestLine, "connect-not-supported";
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
    /// The request line says `HTTP/1.x` with a minor version above 1: it is read as HTTP/1.1
    /// (RFC 9110 §2.5), framing included, and [`as_http11`] must rewrite it so before the
    /// HTTP/1.1 parser (which knows only 1.0 and 1.1) reads it.
    pub later_minor: bool,
}

/// Rewrites the version of the request line at the start of `head`, a head whose
/// [`Head::later_minor`] is set, to `HTTP/1.1`: one digit, in place.
pub fn as_http11(head: &mut [u8]) {
    if let Some(lf) = memchr::memchr(b'\n', head)
        && lf >= 9
        && &head[lf - 9..lf - 2] == b"HTTP/1."
    {
        head[lf - 2] = b'1';
    }
}

/// A byte table: ASCII letters and digits, plus `extra`.
const fn alnum_and(extra: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (i as u8).is_ascii_alphanumeric();
        i += 1;
    }
    let mut j = 0;
    while j < extra.len() {
        t[extra[j] as usize] = true;
        j += 1;
    }
    t
}

/// RFC 9110 §5.6.2 tchar.
static TCHAR: [bool; 256] = alnum_and(b"!#$%&'*+-.^_`|~");

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
static REG_NAME: [bool; 256] = alnum_and(b"-._~!$&'()*+,;=");

#[inline]
fn is_target_byte(b: u8) -> bool {
    TARGET[b as usize]
}

/// Fields a client may not list in `Connection` (it would make a proxy drop them): framing,
/// routing, identity, and cache-relevant end-to-end fields, and the other end-to-end fields
/// of HTTP's own (the list Varnish refuses too). RFC 9110 §7.6.1: "A sender MUST NOT send a
/// connection option corresponding to a field that is intended for all recipients of the
/// content". `Proxy-Authenticate` / `Proxy-Authorization` concern the next hop only and may
/// be named.
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
    "accept",
    "accept-charset",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "content-language",
    "content-location",
    "content-md5",
    "content-range",
    "etag",
    "expires",
    "from",
    "last-modified",
    "location",
    "max-forwards",
    "retry-after",
    "server",
    "set-cookie",
    "warning",
    "www-authenticate",
];

/// `v` without optional white space (SP, HTAB) at either end (RFC 9110 §5.6.3).
pub fn trim_ows(mut v: &[u8]) -> &[u8] {
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

/// Whether a request line whose LF has not arrived yet is already longer than `max`. Its last
/// byte may be the CR that ends it: a line of exactly `max` bytes must not be refused because
/// its CR and LF came in different reads.
pub(crate) fn partial_line_too_long(partial: &[u8], max: usize) -> bool {
    partial.len() - usize::from(partial.last() == Some(&b'\r')) > max
}

/// Parses the head at the start of `data` in one pass: `Some((length, head))` once its blank
/// line is in `data`, `None` while it is incomplete (with every complete line already checked),
/// or the first rule it breaks.
pub fn parse_head(data: &[u8], limits: &Limits) -> Result<Option<(usize, Head)>, Violation> {
    let Some(first) = memchr::memchr(b'\n', data) else {
        return if partial_line_too_long(data, limits.max_request_line) {
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
    let (http10, later_minor) = request_line(&data[..first - 1])?;
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
        if j - pos > limits.max_field_size {
            return Err(Violation::HeaderTooLarge);
        }
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
            later_minor,
        },
    )))
}

/// The request line at the start of `data` (without its CRLF) when it is complete, at most
/// `max` bytes and valid: what the access log shows of a refused request (else `-`).
pub fn valid_request_line(data: &[u8], max: usize) -> Option<&[u8]> {
    let window = &data[..data.len().min(max.saturating_add(2))];
    let end = memchr::memchr(b'\n', window)?;
    let line = data[..end].strip_suffix(b"\r")?;
    request_line(line).ok()?;
    Some(line)
}

/// `method SP request-target SP HTTP-version`. Returns whether it is HTTP/1.0, and whether it
/// is a later HTTP/1 minor version, read as HTTP/1.1: "A recipient that receives a message
/// with a major version number that it implements and a minor version number higher than
/// what it implements SHOULD process the message as if it were in the highest minor version
/// within that major version to which the recipient is conformant" (RFC 9110 §2.5). Another
/// major version is not supported (505).
fn request_line(line: &[u8]) -> Result<(bool, bool), Violation> {
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
    let version = match version {
        b"HTTP/1.1" => (false, false),
        b"HTTP/1.0" => (true, false),
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', d2] if d2.is_ascii_digit() => (false, true),
        [b'H', b'T', b'T', b'P', b'/', d1, b'.', d2]
            if d1.is_ascii_digit() && d2.is_ascii_digit() =>
        {
            return Err(Violation::VersionNotSupported);
        }
        _ => return Err(Violation::BadVersion),
    };
    Ok(version)
}

/// An HTTP/2 `:path` (RFC 9113 §8.3.1): origin-form, or `*` for OPTIONS, with only the bytes
/// and escapes an HTTP/1.1 request target may have.
pub fn check_path(path: &[u8], is_options: bool) -> Result<(), Violation> {
    match path.first() {
        Some(b'/') => check_target(path, false, is_options),
        Some(b'*') if path.len() == 1 && is_options => Ok(()),
        _ => Err(Violation::BadTarget),
    }
}

/// Whether a field value has no leading or trailing space or tab (RFC 9113 §8.2.1: malformed
/// in HTTP/2; HTTP/1.1 trims them as optional whitespace).
pub fn trimmed_value(value: &[u8]) -> bool {
    !matches!(value.first(), Some(b' ' | b'\t')) && !matches!(value.last(), Some(b' ' | b'\t'))
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

mod stream;

pub use stream::{Scan, Scanner};

#[cfg(test)]
mod tests;
