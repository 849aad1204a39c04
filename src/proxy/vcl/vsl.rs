//! The Varnish-style records (`log.vsl_records`, `txlog/vsl.rs`) of a request under VCL: its
//! transaction begun at the first vcl_recv (`ReqMethod`, `ReqURL`, `ReqProtocol`,
//! `ReqHeader`), its backend request's (`Link`, `BereqMethod`, ... as vcl_backend_fetch
//! leaves them, `BerespStatus`, `BerespHeader` as they arrive, `Fetch_Body`), each
//! subroutine's `VCL_call` / `VCL_return`, and the response as it goes out (`RespStatus`,
//! `RespHeader`). Varnish's tags and wording; nothing here runs while no record is kept.

use std::sync::Arc;

use http::{HeaderMap, Method as HttpMethod, Uri, Version};

use super::{Bereq, VclRuntime};
use crate::txlog::vsl::{Side, Transaction};
use crate::vcl::run::Verdict;
use crate::vcl::types::Method;

/// `HTTP/1.1` as Varnish's `*Protocol` records write it.
pub(in crate::proxy) fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// A subroutine's name as `VCL_call` writes it: `RECV`, `BACKEND_FETCH`.
fn call_name(m: Method) -> String {
    m.sub_name().trim_start_matches("vcl_").to_ascii_uppercase()
}

/// Logs `VCL_call` before subroutine `m` runs.
pub(in crate::proxy) fn call(t: Option<&Transaction>, m: Method) {
    if let Some(t) = t {
        t.log("VCL_call", call_name(m));
    }
}

/// Logs `VCL_return` (and for a failure `VCL_Error` first) after it ran, the `std.log`
/// lines it wrote (`VCL_Log`: `log`'s lines past the first `from`, which were there before)
/// and its `VCL_Error` lines (`errors`, taken: a refused `ban()`).
pub(in crate::proxy) fn returned(
    t: Option<&Transaction>,
    verdict: &Verdict,
    (log, from): (&[String], usize),
    errors: &std::sync::Mutex<Vec<String>>,
) {
    let errors = errors
        .lock()
        .map(|mut e| std::mem::take(&mut *e))
        .unwrap_or_default();
    let Some(t) = t else {
        return;
    };
    for line in log.iter().skip(from) {
        t.log("VCL_Log", line.clone());
    }
    for line in errors {
        t.log("VCL_Error", line);
    }
    if let Verdict::Fail(why) = verdict {
        t.log("VCL_Error", why.clone());
    }
    t.log("VCL_return", verdict.as_str());
}

/// A client request's transaction (`Begin req PARENT REASON`: `rxreq`, `esi` for an include,
/// `restart`), with the request as it arrived or restarts; `None` while no record is kept.
pub(in crate::proxy) fn begin_req(
    rt: &VclRuntime,
    xid: u64,
    (parent, reason): (u64, &str),
    (method, uri, version, headers): (&HttpMethod, &Uri, Version, &HeaderMap),
) -> Option<Arc<Transaction>> {
    let vsl = rt.vsl.clone()?;
    let t = Transaction::begin(vsl, xid, Side::Client, ("req", parent, reason));
    t.log("ReqMethod", method.as_str());
    t.log("ReqURL", target(uri));
    t.log("ReqProtocol", protocol(version));
    t.headers("ReqHeader", headers);
    Some(Arc::new(t))
}

/// The request target as the request line carries it.
fn target(uri: &Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| uri.to_string(), |p| p.as_str().to_string())
}

/// A backend request's transaction (`Begin bereq PARENT fetch`), linked from the client's
/// (`Link bereq XID fetch`); its fields are logged as made from the client's request.
pub(in crate::proxy) fn begin_bereq(
    rt: &VclRuntime,
    client: Option<&Transaction>,
    parent: u64,
    bereq: &Bereq,
) -> Option<Arc<Transaction>> {
    let vsl = rt.vsl.clone()?;
    let reason = if bereq.bgfetch { "bgfetch" } else { "fetch" };
    if let Some(c) = client {
        c.log("Link", format!("bereq {} {reason}", bereq.xid));
    }
    let t = Transaction::begin(vsl, bereq.xid, Side::Backend, ("bereq", parent, reason));
    t.log("BereqMethod", bereq.method.as_str());
    t.log("BereqURL", target(&bereq.uri));
    t.log("BereqProtocol", "HTTP/1.1");
    t.headers("BereqHeader", &bereq.headers);
    Some(Arc::new(t))
}

/// What vcl_backend_fetch changed: `BereqURL`, `BereqMethod`, `BereqHeader` for a field set,
/// `BereqUnset` for one removed (as Varnish logs each change).
pub(in crate::proxy) fn bereq_changed(
    t: &Transaction,
    before: &(HttpMethod, Uri, HeaderMap),
    after: &Bereq,
) {
    if before.0 != after.method {
        t.log("BereqMethod", after.method.as_str());
    }
    if before.1 != after.uri {
        t.log("BereqURL", target(&after.uri));
    }
    diff(t, ("BereqHeader", "BereqUnset"), &before.2, &after.headers);
}

/// Logs the fields `after` has that `before` has not (`set`) and the reverse (`unset`).
pub(in crate::proxy) fn diff(
    t: &Transaction,
    (set, unset): (&'static str, &'static str),
    before: &HeaderMap,
    after: &HeaderMap,
) {
    let line = crate::txlog::vsl::field_line;
    for (n, v) in before {
        if !after.get_all(n).iter().any(|w| w == v) {
            t.log(unset, line(n, v));
        }
    }
    for (n, v) in after {
        if !before.get_all(n).iter().any(|w| w == v) {
            t.log(set, line(n, v));
        }
    }
}

/// What vcl_backend_response changed in `beresp`'s fields, logged before its `VCL_return`
/// as Varnish logs each `set` and `unset`: `BerespUnset` for a field line it removed (as the
/// line was), `BerespHeader` for one it set, under the name as the program spells it
/// (`spelled`, else lowercase: `set beresp.http.x-ttl` logs `x-ttl: ...`). Unsets first,
/// then sets, each in the fields' order (Varnish logs them in the statements' order).
pub(in crate::proxy) fn beresp_changed(
    t: &Transaction,
    before: &HeaderMap,
    after: &HeaderMap,
    spelled: &std::collections::HashMap<http::HeaderName, Box<str>>,
) {
    for (n, v) in before {
        if !after.get_all(n).iter().any(|w| w == v) {
            t.log("BerespUnset", crate::txlog::vsl::field_line(n, v));
        }
    }
    for (n, v) in after {
        if !before.get_all(n).iter().any(|w| w == v) {
            let name = spelled.get(n).map_or(n.as_str(), |s| s);
            t.log(
                "BerespHeader",
                format!("{name}: {}", String::from_utf8_lossy(v.as_bytes())),
            );
        }
    }
}

/// A response head as `PREFIXProtocol`, `PREFIXStatus`, `PREFIXReason` and `PREFIXHeader`
/// records (`Beresp`, `Resp`).
pub(in crate::proxy) fn response(
    t: &Transaction,
    tags: [&'static str; 4],
    (version, status, reason): (Version, http::StatusCode, Option<&str>),
    headers: &HeaderMap,
) {
    t.log(tags[0], protocol(version));
    t.log(tags[1], status.as_str());
    t.log(
        tags[2],
        reason
            .or(status.canonical_reason())
            .unwrap_or("Unknown")
            .to_string(),
    );
    t.headers(tags[3], headers);
}

/// `Fetch_Body`: how the backend response's body is read (Varnish's body status number and
/// name: 2 chunked, 3 length, 4 eof, 0 none) and whether it streams.
pub(in crate::proxy) fn fetch_body(
    t: &Transaction,
    headers: &HeaderMap,
    status: u16,
    stream: bool,
) {
    let (n, how) = if status == 204 || status == 304 {
        (0, "none")
    } else if headers.contains_key(http::header::TRANSFER_ENCODING) {
        (2, "chunked")
    } else if headers.contains_key(http::header::CONTENT_LENGTH) {
        (3, "length")
    } else {
        (4, "eof")
    };
    let mode = if stream { "stream" } else { "-" };
    t.log("Fetch_Body", format!("{n} {how} {mode}"));
}
