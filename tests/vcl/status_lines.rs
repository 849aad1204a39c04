//! Status lines under VCL: wide statuses, reasons VCL sets or the backend sends, stored with
//! the object and sent by its hits; Shellac's own stored fields hidden from VCL.

use crate::common;
use common::vcl::start_vcl;
use common::{Origin, Reply, get, raw};

/// Regression (Varnish's v00050): VCL keeps a status above 999 (up to 65535: the digits
/// above the last three are VCL's own signalling) and the wire gets its last three digits;
/// setting a status resets the reason to that status's own (http_SetStatus); a status that
/// is negative, above 65535 or whose last three digits are below 100 fails the subroutine.
#[tokio::test]
async fn varnish_v00050_wide_statuses_stay_in_vcl_and_go_out_modulo_1000() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/synth") { return (synth(22301, "Hamburg")); }
    return (pass);
}
sub vcl_backend_response {
    set beresp.status = beresp.status + 1000;
    set beresp.http.wide = beresp.status;
    set beresp.http.reason = beresp.reason;
}
sub vcl_deliver {
    if (req.url == "/deliver") {
        set resp.status = 40404;
        set resp.http.wide = resp.status;
    }
    if (req.http.small) { set resp.status = 99; }
    if (req.http.huge) { set resp.status = 65536; }
    if (req.http.negative) { set resp.status = -200; }
}
sub vcl_synth {
    if (resp.reason == "VCL failed") { return (deliver); }
    set resp.http.synth = resp.status + " " + resp.reason;
    set resp.status = 22302;
    set resp.reason = "Wrong Postcode";
    set resp.http.residual = resp.status % 10000;
}
"#;
    let shellac = start_vcl("v00050", vcl, &[origin.addr]).await;
    // Path, request fields, the status line sent, fields the response must carry.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str, &'a [&'a str]);
    let cases: [Case; 6] = [
        ("/a", &[], "200 OK", &["wide: 1200", "reason: OK"]),
        ("/deliver", &[], "404 Not Found", &["wide: 40404"]),
        (
            "/synth",
            &[],
            "302 Wrong Postcode",
            &["synth: 22301 Hamburg", "residual: 2302"],
        ),
        ("/a", &[("small", "1")], "503 VCL failed", &[]),
        ("/a", &[("huge", "1")], "503 VCL failed", &[]),
        ("/a", &[("negative", "1")], "503 VCL failed", &[]),
    ];
    for (path, fields, line, want) in cases {
        let extra: String = fields
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
        let text = raw(shellac.addr, req.as_bytes()).await;
        let head = text.to_ascii_lowercase();
        assert!(
            text.starts_with(&format!("HTTP/1.1 {line}\r\n")),
            "{path} {fields:?}: {text}"
        );
        for w in want {
            let w = w.to_ascii_lowercase();
            assert!(
                head.contains(&format!("\r\n{w}\r\n")),
                "{path}: {w}: {text}"
            );
        }
    }
    shellac.stop().await;
}

/// Shellac's own stored fields (`shellac-status`, `shellac-identity`, `shellac-esi`,
/// `shellac-source`) are not VCL's: `obj.http.*`, `beresp.http.*` and `resp.http.*` read
/// none of them, setting one fails the subroutine (no VCL forges an object's status line),
/// and an `unset` leaves the stored one in place.
#[tokio::test]
async fn vcl_neither_sees_nor_forges_shellacs_own_stored_fields() {
    let origin = Origin::start(|_| Reply::ok("body").cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    set beresp.reason = "Own";
    unset beresp.http.shellac-status;
    if (bereq.http.forge) { set beresp.http.shellac-status = "200 Forged"; }
}
sub vcl_hit {
    set req.http.obj-status = "[" + obj.http.shellac-status + "]";
}
sub vcl_deliver {
    set resp.http.obj-status = req.http.obj-status;
    set resp.http.resp-status = "[" + resp.http.shellac-status + "]";
    if (req.http.forge-resp) { set resp.http.shellac-identity = "gzip"; }
}
"#;
    let shellac = start_vcl("own-fields-hidden", vcl, &[origin.addr]).await;
    let ask = |path: &'static str, extra: &'static str| {
        let addr = shellac.addr;
        async move {
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
            raw(addr, req.as_bytes()).await
        }
    };
    let miss = ask("/a", "").await;
    assert!(miss.starts_with("HTTP/1.1 200 Own\r\n"), "{miss}");
    // The hit: the stored reason is sent (the unset left the field), VCL read none of it.
    let hit = ask("/a", "").await;
    assert!(hit.starts_with("HTTP/1.1 200 Own\r\n"), "{hit}");
    assert!(hit.contains("\r\nobj-status: []\r\n"), "{hit}");
    assert!(hit.contains("\r\nresp-status: []\r\n"), "{hit}");
    assert!(
        !hit.to_ascii_lowercase().contains("shellac-status"),
        "{hit}"
    );
    assert_eq!(shellac.stat("cache_hit").await, 1);
    // Setting one fails the subroutine: nothing forged is stored or sent.
    let forged = ask("/b", "forge: 1\r\n").await;
    assert!(forged.starts_with("HTTP/1.1 503 "), "{forged}");
    assert!(!forged.contains("Forged"), "{forged}");
    let forged = ask("/a", "forge-resp: 1\r\n").await;
    assert!(forged.starts_with("HTTP/1.1 503 "), "{forged}");
    assert!(
        !forged.to_ascii_lowercase().contains("shellac-identity"),
        "{forged}"
    );
    shellac.stop().await;
}

/// A backend's own reason phrase (`200 Okay`) is `beresp.reason` in vcl_backend_response and
/// is stored with the object: its hit sends it (Varnish keeps `obj.reason`) and `obj.reason`
/// reads it; a canonical one stores nothing of its own.
#[tokio::test]
async fn a_backends_own_reason_phrase_is_beresp_reason_and_stored() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        // Two fetches at most (/okay and /ok), one connection each or reused: bounded.
        for _ in 0..2 {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                for _ in 0..4 {
                    let Ok(n) = conn.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..end]).to_string();
                        seen.drain(..end + 4);
                        let line = if head.starts_with("GET /okay") {
                            "200 Okay"
                        } else {
                            "200 OK"
                        };
                        let resp = format!(
                            "HTTP/1.1 {line}\r\nCache-Control: max-age=60\r\nContent-Length: 1\r\n\r\nx"
                        );
                        if conn.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response { set beresp.http.seen = beresp.reason; }
sub vcl_hit { set req.http.obj = obj.reason; }
sub vcl_deliver { if (req.http.obj) { set resp.http.obj = req.http.obj; } }
"#;
    let shellac = start_vcl("backend-reason", vcl, &[addr]).await;
    let ask = |path: &'static str| {
        let addr = shellac.addr;
        async move {
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            raw(addr, req.as_bytes()).await
        }
    };
    let miss = ask("/okay").await;
    assert!(miss.starts_with("HTTP/1.1 200 Okay\r\n"), "{miss}");
    assert!(miss.contains("\r\nseen: Okay\r\n"), "{miss}");
    let hit = ask("/okay").await;
    assert!(hit.starts_with("HTTP/1.1 200 Okay\r\n"), "{hit}");
    assert!(hit.contains("\r\nobj: Okay\r\n"), "{hit}");
    assert!(!hit.contains("shellac-status"), "{hit}");
    ask("/ok").await;
    let hit = ask("/ok").await;
    assert!(hit.starts_with("HTTP/1.1 200 OK\r\n"), "{hit}");
    assert!(hit.contains("\r\nobj: OK\r\n"), "{hit}");
    assert_eq!(shellac.stat("cache_hit").await, 2);
    shellac.stop().await;
    server.abort();
}

/// A revalidated copy keeps the status line it was stored with: vcl_backend_response on the
/// 304 sees the stored wide status and reason (Varnish's beresp is the stored object then),
/// never Shellac's stored field, and the refreshed copy is sent with them.
#[tokio::test]
async fn a_revalidated_copy_keeps_its_wide_status_and_reason() {
    let origin = Origin::start(|seen| {
        if seen.headers.get("if-none-match").is_some() {
            Reply::ok("").status(304).header("etag", "\"v1\"")
        } else {
            Reply::ok("body").header("etag", "\"v1\"")
        }
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    if (!beresp.was_304) {
        set beresp.status = beresp.status + 1000;
        set beresp.reason = "Wide";
    }
    set beresp.http.seen = beresp.status + " " + beresp.reason;
    set beresp.http.leak = beresp.http.shellac-status;
    if (beresp.was_304) {
        set beresp.ttl = 60s;
    } else {
        set beresp.ttl = 1ms;
        set beresp.grace = 0s;
        set beresp.keep = 1m;
    }
}
sub vcl_deliver { set resp.http.wide = resp.status; }
"#;
    let shellac = start_vcl("revalidated-wide", vcl, &[origin.addr]).await;
    let ask = |_: ()| {
        let addr = shellac.addr;
        async move {
            raw(
                addr,
                b"GET /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .await
            .to_ascii_lowercase()
        }
    };
    let first = ask(()).await;
    assert!(first.starts_with("http/1.1 200 wide\r\n"), "{first}");
    assert!(first.contains("\r\nseen: 1200 wide\r\n"), "{first}");
    // Stale after 1 ms (kept 1 min): revalidated with the stored ETag, answered 304.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let second = ask(()).await;
    assert!(second.starts_with("http/1.1 200 wide\r\n"), "{second}");
    assert!(second.contains("\r\nseen: 1200 wide\r\n"), "{second}");
    assert!(second.contains("\r\nwide: 1200\r\n"), "{second}");
    assert!(
        second.contains("\r\nleak: \r\n") || !second.contains("\r\nleak:"),
        "{second}"
    );
    assert!(!second.contains("shellac-status"), "{second}");
    assert_eq!(origin.count(), 2);
    assert!(
        origin.last().headers.get("if-none-match").is_some(),
        "the second fetch revalidated"
    );
    shellac.stop().await;
}

/// RFC 9110 §15: a status past 599 is invalid, and a client SHOULD process it as a 5xx. Under
/// VCL a backend's 999 is taken (Varnish takes any three digits), and `stale-if-error`
/// answers it with the stale copy as it answers a 500 (RFC 5861 §4).
#[tokio::test]
async fn a_backend_status_past_599_is_a_server_error() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let asked = AtomicUsize::new(0);
    let origin = common::raw_origin::RawOrigin::start(move |_| {
        let line = match asked.fetch_add(1, Ordering::SeqCst) {
            0 => "200 OK\r\ncache-control: max-age=1, stale-if-error=60",
            _ => "999 Oops",
        };
        format!("HTTP/1.1 {line}\r\ncontent-length: 4\r\n\r\nbody").into_bytes()
    })
    .await;
    // No grace: past its TTL the copy is stale, kept for revalidation and stale-if-error.
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response { set beresp.grace = 0s; set beresp.keep = 1m; }
"#;
    let shellac = start_vcl("status-999", vcl, &[origin.addr]).await;
    assert_eq!(get(shellac.addr, "/").await.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "body"));
    assert!(
        r.cache_status().contains("detail=stale-if-error"),
        "{}",
        r.cache_status()
    );
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("cache_stale_served").await, 1);
    shellac.stop().await;
    origin.stop();
}

/// Regression (Varnish's p00010): `synth()` of a status without a reason phrase of its own
/// (999) carries Varnish's "Unknown HTTP Status", which vcl_synth reads as `resp.reason`; a
/// known status keeps its own phrase, and a reason given to `synth()` wins.
#[tokio::test]
async fn varnish_p00010_a_synth_status_without_a_phrase_is_unknown_http_status() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let vcl = r#"vcl 4.1;
import std;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/given") { return (synth(999, "Mine")); }
    return (synth(std.integer(req.http.code, 999)));
}
sub vcl_synth { set resp.http.reason = resp.reason; }
"#;
    let shellac = start_vcl("p00010", vcl, &[origin.addr]).await;
    for (path, code, line, reason) in [
        (
            "/",
            "999",
            "HTTP/1.1 999 Unknown HTTP Status\r\n",
            "Unknown HTTP Status",
        ),
        ("/", "207", "HTTP/1.1 207 Multi-Status\r\n", "Multi-Status"),
        ("/given", "999", "HTTP/1.1 999 Mine\r\n", "Mine"),
    ] {
        let text = raw(
            shellac.addr,
            format!("GET {path} HTTP/1.1\r\nHost: t\r\ncode: {code}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
        assert!(text.starts_with(line), "{code}: {text}");
        assert!(
            text.contains(&format!("reason: {reason}\r\n")),
            "{code}: {text}"
        );
    }
    assert_eq!(shellac.stat("synth_resp").await, 3);
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}
