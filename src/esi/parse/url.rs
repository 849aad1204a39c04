//! An include's URL as written, resolved against the page's: absolute (`http://`, `https://`),
//! root-relative or relative, with XML's five named entities decoded, as Varnish does.

use super::Target;

/// Varnish's words for an absolute `src` it cannot split into a host and a path.
pub(super) const INVALID_URL: &str = "ESI 1.0 <esi:include> invalid src= URL";
/// Varnish's words (with `+esi_ignore_https`, which is what Shellac does) for an
/// `https://` include: asked for through Shellac like any other, with its `Host`.
pub(super) const HTTPS_AS_HTTP: &str = "ESI 1.0 <esi:include> https:// treated as http://";

/// Whether `raw` is an `https://` URL (Varnish warns before it resolves it).
pub(super) fn is_https(raw: &[u8]) -> bool {
    raw.get(..8)
        .is_some_and(|h| h.eq_ignore_ascii_case(b"https://"))
}

/// An include URL as written (`http://host/p`, `https://host/p`, `/p` or `p`) resolved against
/// the page's target, with XML's five named entities decoded in the path, as Varnish does.
pub(super) fn resolve(raw: &[u8], page: &str) -> Result<Target, &'static str> {
    if raw.iter().any(|b| b.is_ascii_control()) {
        return Err("ESI 1.0 <esi:include> has a control character in its URL");
    }
    let raw = std::str::from_utf8(raw).map_err(|_| "ESI 1.0 <esi:include> URL is not UTF-8")?;
    let (https, rest) = if let Some(rest) = strip_prefix_ci(raw, "http://") {
        (Some(false), rest)
    } else if let Some(rest) = strip_prefix_ci(raw, "https://") {
        (Some(true), rest)
    } else {
        (None, raw)
    };
    if let Some(https) = https {
        // An absolute URL without a path (`http://host`) has no request target: Varnish
        // refuses it (e00006), and so does Shellac (no `/` is made up).
        let Some(n) = rest.find('/') else {
            return Err(INVALID_URL);
        };
        let (host, path) = (&rest[..n], &rest[n..]);
        if host.is_empty() {
            return Err(INVALID_URL);
        }
        return Ok(Target {
            host: Some(host.to_owned()),
            https,
            path: decode_entities(path),
        });
    }
    if rest.starts_with('/') {
        return Ok(Target {
            host: None,
            https: false,
            path: decode_entities(rest),
        });
    }
    // Relative: the page's path up to its last '/' before any query.
    let path_end = page.find('?').unwrap_or(page.len());
    let base = match page[..path_end].rfind('/') {
        Some(n) => &page[..=n],
        None => &page[..path_end],
    };
    let mut path = String::with_capacity(base.len() + 1 + rest.len());
    path.push_str(base);
    if !path.ends_with('/') {
        path.push('/');
    }
    path.push_str(&decode_entities(rest));
    Ok(Target {
        host: None,
        https: false,
        path,
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    'outer: while let Some(n) = rest.find('&') {
        out.push_str(&rest[..n]);
        rest = &rest[n..];
        for (entity, c) in [
            ("&apos;", '\''),
            ("&quot;", '"'),
            ("&lt;", '<'),
            ("&gt;", '>'),
            ("&amp;", '&'),
        ] {
            if let Some(after) = rest.strip_prefix(entity) {
                out.push(c);
                rest = after;
                continue 'outer;
            }
        }
        out.push('&');
        rest = &rest[1..];
    }
    out.push_str(rest);
    out
}
