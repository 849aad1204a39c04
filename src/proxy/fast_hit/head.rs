//! A fast hit's first step: the request head, as the gate's strict parser read it
//! (`http::strict::Parts`: no second parse), screened — a plain `GET` or `HEAD` over HTTP/1.1
//! in origin form, one `Host`, none of the fields that change a lookup or a delivery. Anything
//! else is declined to the full path.

use std::net::SocketAddr;

use http::Method;

use super::super::Proxy;
use crate::http::cache_control::CacheControl;
use crate::http::strict::Parts;

/// A request head the fast path may answer, as its bytes say it.
pub(super) struct Head<'h, 'b> {
    pub method: Method,
    pub head_only: bool,
    /// Origin-form, as sent (it needs no normalising).
    pub target: &'b str,
    pub host: &'b str,
    pub user_agent: Option<&'b [u8]>,
    pub fields: &'h [httparse::Header<'b>],
}

/// The fields a fast hit keeps from the head's: `Host` and `User-Agent`.
struct Kept<'b> {
    host: Option<&'b [u8]>,
    user_agent: Option<&'b [u8]>,
}

impl Proxy {
    /// The head `bytes`, whose parts the gate's strict parser found (`parts`), screened, its
    /// fields copied into `fields`: `None` declines the request. What that parser checked is
    /// not checked again (`http::strict`): tokens, target bytes (no `#`, no space, ASCII),
    /// field bytes, exactly one `Host` (an HTTP/1.1 request without one is refused) with a
    /// valid authority (no `/`, `@` or space, not empty), framing.
    #[inline]
    pub(super) fn read_head<'h, 'b>(
        &self,
        bytes: &'b [u8],
        parts: &Parts,
        fields: &'h mut [httparse::Header<'b>],
        client: SocketAddr,
    ) -> Option<Head<'h, 'b>> {
        if parts.http10() {
            return None;
        }
        let (method, head_only) = match parts.method(bytes) {
            b"GET" => (Method::GET, false),
            b"HEAD" => (Method::HEAD, true),
            _ => return None,
        };
        // The head checked as UTF-8 once (ASCII in practice: one pass over whole words) and
        // its parts cut from it, rather than each part checked on its own (three or more
        // short checks: ~300 instructions a hit for `GET /file6k.png` with one `Host`); a head
        // with other bytes (obs-text in a value) has its parts checked one by one.
        let text = std::str::from_utf8(bytes).ok();
        let as_str = |part: &'b [u8]| -> Option<&'b str> {
            match text {
                Some(text) => {
                    let at = (part.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
                    text.get(at..at.checked_add(part.len())?)
                }
                None => std::str::from_utf8(part).ok(),
            }
        };
        let target = as_str(parts.target(bytes))?;
        // A target with no `%` is normal as it is (the strict parser saw every byte of it).
        if !target.starts_with('/')
            || (parts.target_escapes() && crate::http::target::normalise(target).is_some())
        {
            return None;
        }
        let mut n = 0;
        for (name, value) in parts.fields(bytes)? {
            *fields.get_mut(n)? = httparse::Header {
                name: as_str(name)?,
                value,
            };
            n += 1;
        }
        let fields: &'h [httparse::Header<'b>] = &fields[..n];
        let Kept { host, user_agent } = self.screen_fields(fields, client)?;
        let host = as_str(host?)?;
        Some(Head {
            method,
            head_only,
            target,
            host,
            user_agent,
            fields,
        })
    }

    /// The `Host` and `User-Agent` values of `fields`, or `None` when a field makes the
    /// request one the full path must answer (a second `Host`, a directive that counts, a
    /// field that changes the answer, one the full path removes).
    #[inline]
    fn screen_fields<'b>(
        &self,
        fields: &[httparse::Header<'b>],
        client: SocketAddr,
    ) -> Option<Kept<'b>> {
        let mut host: Option<&[u8]> = None;
        let mut user_agent = None;
        let mut trusted = None;
        for field in fields {
            let name = field.name.as_bytes();
            if name.eq_ignore_ascii_case(b"host") {
                if host.is_some() {
                    return None;
                }
                host = Some(field.value);
            } else if name.eq_ignore_ascii_case(b"user-agent") {
                user_agent = Some(field.value);
            } else if name.eq_ignore_ascii_case(b"cache-control")
                || name.eq_ignore_ascii_case(b"pragma")
            {
                // The request's directives count only with `cache.request_cache_control`
                // (then the full path decides); without it only `no-store` does (a pass).
                if self.config.cache.request_cache_control
                    || (name.len() == 13 && CacheControl::from_lines([field.value]).no_store)
                {
                    return None;
                }
            } else if changes_the_answer(name) {
                return None;
            } else if !self.config.server.underscores_in_headers && name.contains(&b'_') {
                // Dropped and counted by the full path (`Proxy::handle`).
                return None;
            } else if matches!(
                name.first().map(|b| b | 0x20),
                Some(b'x' | b'f' | b'v' | b't')
            ) && name.len() <= 32
            {
                // Every listed name is shorter: lower-cased on the stack, not allocated.
                let mut lower = [0u8; 32];
                let lower = &mut lower[..name.len()];
                lower.copy_from_slice(name);
                lower.make_ascii_lowercase();
                let trusted =
                    *trusted.get_or_insert_with(|| self.config.server.trusts(client.ip()));
                if std::str::from_utf8(lower)
                    .is_ok_and(|n| crate::http::headers::removed_from_request(n, trusted))
                {
                    return None;
                }
            }
        }
        Some(Kept { host, user_agent })
    }
}

/// Request fields after which a hit is not simply the object as it is: preconditions and
/// ranges (`If-*`, `Range`), the builtin pass (`Authorization`), connection management
/// (`Connection`, `Upgrade`, `Expect`, `TE`, `Keep-Alive`) and body framing. Names compared
/// without case. (`Cache-Control` and `Pragma` are judged by `fast_hit` itself.)
fn changes_the_answer(name: &[u8]) -> bool {
    const NAMES: [&[u8]; 9] = [
        b"range",
        b"authorization",
        b"connection",
        b"upgrade",
        b"expect",
        b"te",
        b"keep-alive",
        b"content-length",
        b"transfer-encoding",
    ];
    (name.len() > 3 && name[..3].eq_ignore_ascii_case(b"if-"))
        || NAMES.iter().any(|n| name.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_that_change_the_answer() {
        for name in [
            "If-None-Match",
            "if-modified-since",
            "Range",
            "AUTHORIZATION",
            "Connection",
            "Upgrade",
            "Expect",
            "TE",
            "Keep-Alive",
            "Content-Length",
            "Transfer-Encoding",
        ] {
            assert!(changes_the_answer(name.as_bytes()), "{name}");
        }
        for name in [
            "Accept",
            "Accept-Encoding",
            "User-Agent",
            "If",
            "Ranges",
            "Cookie",
        ] {
            assert!(!changes_the_answer(name.as_bytes()), "{name}");
        }
    }
}
