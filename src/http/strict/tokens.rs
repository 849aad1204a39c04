//! The bytes RFC 9110 / 9112 allow where (tokens, field values, targets, as lookup tables),
//! lists and OWS, and the end-to-end fields `Connection` may not name.

/// A byte table: ASCII letters and digits, plus `extra`.
pub(super) const fn alnum_and(extra: &[u8]) -> [bool; 256] {
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
pub(super) static TCHAR: [bool; 256] = alnum_and(b"!#$%&'*+-.^_`|~");

#[inline]
pub(super) fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// field-vchar / SP / HTAB (RFC 9110 §5.5): no CTL (NUL, CR, LF, ...) and no DEL.
pub(super) const fn field_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i == 0x09 || (i >= 0x20 && i != 0x7f);
        i += 1;
    }
    t
}

pub(super) static FIELD: [bool; 256] = field_table();

#[inline]
pub(super) fn is_field_byte(b: u8) -> bool {
    FIELD[b as usize]
}

/// Index of the first byte from `from` on that is not a field byte (or `data.len()`). Eight
/// bytes at a time while none is a control byte or DEL (SWAR, as httparse does); the byte
/// that stops it (usually the CR) and HTAB are looked at one by one.
#[inline]
pub(super) fn field_run(data: &[u8], mut j: usize) -> usize {
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
pub(super) const fn target_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0x21;
    while i < 0x7f {
        t[i] = !matches!(i as u8, b'"' | b'<' | b'>' | b'\\' | b'#');
        i += 1;
    }
    t
}

pub(super) static TARGET: [bool; 256] = target_table();

/// reg-name characters other than `%` (RFC 3986 §3.2.2): unreserved and sub-delims.
pub(super) static REG_NAME: [bool; 256] = alnum_and(b"-._~!$&'()*+,;=");

#[inline]
pub(super) fn is_target_byte(b: u8) -> bool {
    TARGET[b as usize]
}

/// Fields a client may not list in `Connection` (it would make a proxy drop them): framing,
/// routing, identity, and cache-relevant end-to-end fields, and the other end-to-end fields
/// of HTTP's own (the list Varnish refuses too). RFC 9110 §7.6.1: "A sender MUST NOT send a
/// connection option corresponding to a field that is intended for all recipients of the
/// content". `Proxy-Authenticate` / `Proxy-Authorization` concern the next hop only and may
/// be named.
pub(super) const END_TO_END: &[&str] = &[
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
pub(super) fn list(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|b| *b == b',').map(trim_ows)
}
