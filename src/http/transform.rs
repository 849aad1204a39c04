//! What a change of a response's body means for its fields: a strong `ETag` weakened (the
//! bytes are not the ones it named), and `Vary: Accept-Encoding` on a body chosen by content
//! coding. Body filters (`proxy/filter/`) and stored representations (`proxy/represent/`)
//! both make these edits.

use http::header::{self, HeaderMap, HeaderValue};

/// `W/` before a strong `ETag` (RFC 9110 §8.8.3: the bytes are not the ones it named).
pub fn weaken_etag(fields: &mut HeaderMap) {
    let Some(etag) = fields.get(header::ETAG) else {
        return;
    };
    let bytes = etag.as_bytes();
    if bytes.starts_with(b"W/") {
        return;
    }
    let mut weak = Vec::with_capacity(bytes.len() + 2);
    weak.extend_from_slice(b"W/");
    weak.extend_from_slice(bytes);
    if let Ok(v) = HeaderValue::from_bytes(&weak) {
        fields.insert(header::ETAG, v);
    }
}

/// `Vary: Accept-Encoding` added unless the response varies on it (or on `*`) already.
pub fn vary_accept_encoding(fields: &mut HeaderMap) {
    let varies = fields.get_all(header::VARY).iter().any(|v| {
        v.as_bytes().split(|b| *b == b',').any(|n| {
            let n = n.trim_ascii();
            n == b"*" || n.eq_ignore_ascii_case(b"accept-encoding")
        })
    });
    if varies {
        return;
    }
    // Joined to the last `Vary` line, as Varnish does (`Vary: qux, Accept-Encoding`): one
    // line for a client that reads only one.
    let mut lines: Vec<HeaderValue> = fields.get_all(header::VARY).iter().cloned().collect();
    let joined = lines.pop().and_then(|last| {
        let mut v = last.as_bytes().trim_ascii().to_vec();
        if !v.is_empty() {
            v.extend_from_slice(b", ");
        }
        v.extend_from_slice(b"Accept-Encoding");
        HeaderValue::from_bytes(&v).ok()
    });
    fields.remove(header::VARY);
    for line in lines {
        fields.append(header::VARY, line);
    }
    fields.append(
        header::VARY,
        joined.unwrap_or(HeaderValue::from_static("Accept-Encoding")),
    );
}
