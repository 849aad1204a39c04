//! Fast hits (`server.fast_hits`): plain fresh hits from memory answered by the gate without
//! hyper. The answer must be the one the full path gives; everything else must take the full
//! path; responses stay in request order on pipelined and kept-alive connections; counters,
//! log lines, timeouts and released connections behave as for any hit.

mod common;
#[path = "fast_hits/copy_free.rs"]
mod copy_free;
#[path = "fast_hits/reason_phrase.rs"]
mod reason_phrase;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn origin_reply(path: &str) -> Reply {
    match path {
        "/slow" => Reply::ok("slow")
            .cc("max-age=60")
            .delay(Duration::from_millis(300)),
        "/big" => Reply::ok(&"x".repeat(4 << 20)).cc("max-age=60"),
        // Every byte tells its offset: a chunk sent twice, skipped or out of order shows.
        "/pattern" => Reply {
            body: ReplyBody::Bytes(pattern(3 << 20 | 12345)),
            ..Reply::ok("")
        }
        .cc("max-age=60"),
        p => Reply::ok(&format!("body of {p}"))
            .cc("max-age=60")
            .header("etag", "\"v1\"")
            .header("x-custom", "kept")
            .header("surrogate-key", "k1"),
    }
}

/// Status, fields and body; `date`, `age` and the `ttl=` of `Cache-Status` masked (the two
/// instances stored their copies at different moments).
fn shape(r: &Resp) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut fields: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(n, v)| {
            let v = v.to_str().unwrap();
            let v = match n.as_str() {
                "date" | "age" => "*".to_string(),
                "cache-status" => match v.find("ttl=") {
                    Some(i) => format!("{}ttl=*", &v[..i]),
                    None => v.to_string(),
                },
                _ => v.to_string(),
            };
            (n.to_string(), v)
        })
        .collect();
    fields.sort();
    (r.status, fields, r.body.to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_hit_is_the_full_paths_hit() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let fast = Shellac::start(origin.addr, |_| {}).await;
    let full = Shellac::start(origin.addr, |c| c.server.fast_hits = false).await;
    for shellac in [&fast, &full] {
        assert!(
            get(shellac.addr, "/a")
                .await
                .cache_status()
                .contains("fwd=miss")
        );
    }
    for method in ["GET", "HEAD"] {
        let a = request(fast.addr, method, "/a", &[("user-agent", "t/1")], b"").await;
        let b = request(full.addr, method, "/a", &[("user-agent", "t/1")], b"").await;
        assert!(
            a.cache_status().starts_with("shellac; hit; ttl="),
            "{}",
            a.cache_status()
        );
        assert!(a.header("date").is_some(), "a fast hit carries Date");
        assert!(a.header("age").is_some());
        assert_eq!(shape(&a), shape(&b), "{method}");
        assert_eq!(a.header("surrogate-key"), None);
        assert_eq!(a.header("content-length"), Some("10"));
    }
    let (f, s) = (fast.stats().await, full.stats().await);
    assert_eq!(f["cache_hit_fast"], 2);
    assert_eq!(s["cache_hit_fast"], 0);
    for name in [
        "client_req",
        "cache_hit",
        "cache_hit_memory",
        "s_resp_bytes",
    ] {
        assert_eq!(f[name], s[name], "{name}");
    }
    assert_eq!(f["cache_hit"], 2);
    assert_eq!(origin.count(), 2);
    fast.stop().await;
    full.stop().await;
}

/// Requests a stored object cannot simply answer are left to the full path, which applies
/// their semantics (304, 206, revalidation, pass, close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_change_the_answer_take_the_full_path() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/a").await;
    let not_modified = get_with(shellac.addr, "/a", &[("if-none-match", "\"v1\"")]).await;
    assert_eq!(not_modified.status, 304);
    let partial = get_with(shellac.addr, "/a", &[("range", "bytes=0-3")]).await;
    assert_eq!((partial.status, partial.text().as_str()), (206, "body"));
    let authorized = get_with(shellac.addr, "/a", &[("authorization", "Basic eDp5")]).await;
    assert!(
        authorized.cache_status().contains("detail=authorization"),
        "{}",
        authorized.cache_status()
    );
    // Fields the full path removes (rewrite fields; forwarding fields from an untrusted
    // client) leave the request to it: it alone knows what the log then shows.
    for field in [("X-Original-URL", "/b"), ("X-Forwarded-For", "203.0.113.9")] {
        let r = get_with(shellac.addr, "/a", &[field]).await;
        assert!(r.cache_status().contains("hit"), "{field:?}");
    }
    // Connection: close is honoured (hyper answers and closes).
    let closing = exchange(
        shellac.addr,
        b"GET /a HTTP/1.1\r\nhost: test.example\r\nconnection: close\r\n\r\n",
        Duration::from_secs(2),
    )
    .await;
    assert!(closing.closed, "closed after Connection: close");
    assert!(
        closing
            .text
            .to_ascii_lowercase()
            .contains("connection: close")
    );
    // HTTP/1.0: hyper's framing and keep-alive rules.
    let old = exchange(
        shellac.addr,
        b"GET /a HTTP/1.0\r\nhost: test.example\r\n\r\n",
        Duration::from_secs(2),
    )
    .await;
    assert!(
        old.text.starts_with("HTTP/1.0 200") || old.text.starts_with("HTTP/1.1 200"),
        "{}",
        old.text
    );
    assert!(old.closed);
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_hit_fast"], 0, "none of these was a fast hit");
    // 304, 206, the two with removed fields and the two raw ones: hits answered by the full
    // path.
    assert_eq!(stats["cache_hit"], 6);
    shellac.stop().await;
}

/// Pipelined requests: hits after a request hyper is still answering wait for it; the
/// answers arrive in request order whichever path made them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_answers_keep_request_order() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/a").await;
    get(shellac.addr, "/b").await;
    let req = |p: &str| format!("GET {p} HTTP/1.1\r\nhost: test.example\r\n\r\n");
    // Two fast hits, a miss on a slow origin, then hits that must wait for it.
    let all = [req("/a"), req("/b"), req("/slow"), req("/a"), req("/b")].concat();
    let mut stream = TcpStream::connect(shellac.addr).await.unwrap();
    stream.write_all(all.as_bytes()).await.unwrap();
    // And one more while the slow one is still in flight.
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(req("/a").as_bytes()).await.unwrap();
    let text = read_responses(&mut stream, 6).await;
    let bodies: Vec<&str> = text
        .split("HTTP/1.1 ")
        .skip(1)
        .map(|r| r.rsplit("\r\n\r\n").next().unwrap_or(""))
        .collect();
    assert_eq!(
        bodies,
        [
            "body of /a",
            "body of /b",
            "slow",
            "body of /a",
            "body of /b",
            "body of /a"
        ],
        "{text}"
    );
    let stats = shellac.stats().await;
    assert_eq!(
        stats["cache_hit_fast"], 2,
        "the first two; the rest went to hyper in order"
    );
    // Once hyper has answered and flushed, hits on the connection are fast again.
    stream.write_all(req("/b").as_bytes()).await.unwrap();
    let text = read_responses(&mut stream, 1).await;
    assert!(text.ends_with("body of /b"), "{text}");
    assert_eq!(shellac.stat("cache_hit_fast").await, 3);
    shellac.stop().await;
}

/// Reads until `n` responses with bodies of the known sizes (or 5 s).
async fn read_responses(stream: &mut TcpStream, n: usize) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let text = String::from_utf8_lossy(&out).into_owned();
        let complete = text.matches("HTTP/1.1 ").count() == n
            && (text.ends_with("body of /a")
                || text.ends_with("body of /b")
                || text.ends_with("slow"));
        if complete {
            return text;
        }
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return text,
            Ok(Ok(k)) => out.extend_from_slice(&buf[..k]),
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A large fast hit goes out in vectored writes of many stored chunks at once; a reader with a
/// small window takes them in small, partial writes. Every byte arrives once, in order, followed
/// by the next response on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_fast_hit_arrives_whole_through_partial_writes() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let want = pattern(3 << 20 | 12345);
    assert_eq!(get(shellac.addr, "/pattern").await.body.to_vec(), want);
    get(shellac.addr, "/a").await;
    let mut slow = connect_small_window(shellac.addr).await;
    slow.write_all(b"GET /pattern HTTP/1.1\r\nhost: test.example\r\n\r\nGET /a HTTP/1.1\r\nhost: test.example\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let ends = |got: &[u8]| {
        got[got.len().saturating_sub(64)..]
            .windows(10)
            .any(|w| w == b"body of /a")
    };
    while !ends(&got) {
        let n = tokio::time::timeout(Duration::from_secs(20), slow.read(&mut buf))
            .await
            .expect("the answers keep coming")
            .unwrap();
        assert!(n > 0, "closed early after {} bytes", got.len());
        got.extend_from_slice(&buf[..n]);
    }
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(got.starts_with(b"HTTP/1.1 200"));
    assert_eq!(
        &got[head_end..head_end + want.len()],
        &want[..],
        "the body, byte for byte"
    );
    assert!(
        got[head_end + want.len()..].starts_with(b"HTTP/1.1 200"),
        "then the next answer"
    );
    assert_eq!(shellac.stat("cache_hit_fast").await, 2);
    shellac.stop().await;
}

/// A client that stops reading a large fast hit is closed by `send_timeout`, as on the full
/// path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_fast_hit_meets_the_send_timeout() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.send_timeout = shellac::config::units::Dur(Duration::from_millis(300));
    })
    .await;
    assert_eq!(get(shellac.addr, "/big").await.body.len(), 4 << 20);
    let mut slow = connect_small_window(shellac.addr).await;
    slow.write_all(b"GET /big HTTP/1.1\r\nhost: test.example\r\n\r\n")
        .await
        .unwrap();
    let mut closed = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if shellac.stat("client_send_timeout").await == 1 {
            closed = true;
            break;
        }
    }
    assert!(closed, "send timeout counted");
    assert_eq!(shellac.stat("cache_hit_fast").await, 1);
    shellac.stop().await;
}

/// Fast hits leave the connection idle: it is released after `idle_release` and the next
/// fast hit resumes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_with_fast_hits_is_released_and_resumed() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.idle_release = shellac::config::units::Dur(Duration::from_millis(200));
    })
    .await;
    get(shellac.addr, "/a").await;
    let mut conn = Conn::open(shellac.addr).await;
    assert!(
        conn.send("GET", "/a", &[], b"")
            .await
            .cache_status()
            .contains("hit")
    );
    let mut released = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if shellac.stat("client_idle_released").await >= 1 {
            released = true;
            break;
        }
    }
    assert!(released, "released after idle_release");
    let again = conn.send("GET", "/a", &[], b"").await;
    assert_eq!(again.text(), "body of /a");
    assert_eq!(shellac.stat("cache_hit_fast").await, 2);
    shellac.stop().await;
}

/// A connection whose requests are all fast hits never builds hyper's connection (the lean
/// loop, `server/h1/lean.rs`); its clocks are the session's all the same: a head left
/// unfinished after fast hits meets `header_read_timeout`, an idle one `idle_timeout` (closed,
/// counted), and a request the fast path declines is answered by hyper in order after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_of_fast_hits_keeps_its_clocks_and_hands_over_to_hyper() {
    use shellac::config::units::Dur;
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.idle_timeout = Dur(Duration::from_millis(600));
        c.server.header_read_timeout = Dur(Duration::from_millis(400));
    })
    .await;
    get(shellac.addr, "/a").await;
    let req = "GET /a HTTP/1.1\r\nhost: test.example\r\n\r\n";
    // Two fast hits, then half a head: closed at the header timeout, after the answers.
    let seen = exchange(
        shellac.addr,
        format!("{req}{req}GET /a HTTP/1.1\r\nhost: te").as_bytes(),
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(seen.statuses(), [200, 200], "{}", seen.text);
    assert!(seen.closed, "closed at header_read_timeout");
    assert_eq!(shellac.stat("client_header_timeout").await, 1);
    // One fast hit, then nothing: closed at the idle timeout.
    let seen = exchange(shellac.addr, req.as_bytes(), Duration::from_secs(3)).await;
    assert_eq!(seen.statuses(), [200], "{}", seen.text);
    assert!(seen.closed, "closed at idle_timeout");
    assert_eq!(shellac.stat("client_idle_closed").await, 1);
    assert_eq!(shellac.stat("cache_hit_fast").await, 3);
    // Fast hits, then a request the fast path declines (a range) and a hit after it: hyper
    // answers the range, then the hit, in request order.
    let seen = exchange(
        shellac.addr,
        format!("{req}{req}GET /a HTTP/1.1\r\nhost: test.example\r\nrange: bytes=0-3\r\n\r\n{req}")
            .as_bytes(),
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(seen.statuses(), [200, 200, 206, 200], "{}", seen.text);
    assert!(
        seen.text.contains("\r\n\r\nbodyHTTP/1.1 200"),
        "{}",
        seen.text
    );
    assert_eq!(shellac.stat("cache_hit_fast").await, 5);
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// A malformed request after pipelined fast hits: the hits are answered, then the refusal,
/// then the connection closes; nothing after the refused request is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_after_fast_hits_comes_after_their_answers() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/a").await;
    let seen = exchange(
        shellac.addr,
        b"GET /a HTTP/1.1\r\nhost: test.example\r\n\r\n\
          GET /a HTTP/1.1\r\nhost: test.example\r\n\r\n\
          GET /a HTTP/1.1\r\nhost: test.example\r\nhost: other.example\r\n\r\n\
          GET /a HTTP/1.1\r\nhost: test.example\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(seen.statuses(), [200, 200, 400], "{}", seen.text);
    assert!(seen.closed);
    assert_eq!(shellac.stat("cache_hit_fast").await, 2);
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// A URL with `Vary` variants: a fast hit picks the request's variant as the full path does
/// (Accept-Encoding normalised), and never another variant's body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_hits_pick_the_requests_variant() {
    let origin = Origin::start(|s| {
        let ae = s
            .headers
            .get("accept-encoding")
            .map_or("none", |v| v.to_str().unwrap());
        Reply::ok(&format!("for {ae}"))
            .cc("max-age=60")
            .header("vary", "Accept-Encoding")
    })
    .await;
    // `Vary: Accept-Encoding` as any field: without the negotiation, which serves every
    // client from one object (tests/compression/).
    let fast = Shellac::start(origin.addr, |c| c.compression.enabled = false).await;
    let full = Shellac::start(origin.addr, |c| {
        c.server.fast_hits = false;
        c.compression.enabled = false;
    })
    .await;
    let variants: [&[(&str, &str)]; 3] = [
        &[("accept-encoding", "gzip")],
        &[("accept-encoding", "br")],
        &[],
    ];
    for shellac in [&fast, &full] {
        for fields in variants {
            assert!(
                get_with(shellac.addr, "/v", fields)
                    .await
                    .cache_status()
                    .contains("fwd=miss")
            );
        }
    }
    // "gzip, deflate" normalises to gzip; "deflate" to no Accept-Encoding at all.
    for (fields, body) in [
        (&[("accept-encoding", "gzip, deflate")][..], "for gzip"),
        (&[("accept-encoding", "br")][..], "for br"),
        (&[("accept-encoding", "deflate")][..], "for none"),
        (&[][..], "for none"),
    ] {
        let a = get_with(fast.addr, "/v", fields).await;
        let b = get_with(full.addr, "/v", fields).await;
        assert_eq!(a.text(), body, "{fields:?}");
        assert_eq!(shape(&a), shape(&b), "{fields:?}");
    }
    assert_eq!(fast.stat("cache_hit_fast").await, 4);
    assert_eq!(full.stat("cache_hit").await, 4);
    assert_eq!(origin.count(), 6);
    fast.stop().await;
    full.stop().await;
}

/// A head that arrives in pieces is held by the gate until complete, then answered fast like
/// any other; a pipelined request behind it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_in_pieces_is_answered_fast_once_complete() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/a").await;
    get(shellac.addr, "/b").await;
    let mut stream = TcpStream::connect(shellac.addr).await.unwrap();
    stream.write_all(b"GET /a HTTP/1.1\r\nho").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    stream
        .write_all(b"st: test.example\r\n\r\nGET /b HTTP/1.1\r\nhost: test.example\r\n\r\n")
        .await
        .unwrap();
    let text = read_responses(&mut stream, 2).await;
    assert!(
        text.contains("body of /a") && text.ends_with("body of /b"),
        "{text}"
    );
    assert_eq!(shellac.stat("cache_hit_fast").await, 2);
    shellac.stop().await;
}

/// The fast hit reads the head as the gate's strict parser found it (`http::strict::Parts`)
/// instead of parsing it again: values padded with spaces and tabs are read trimmed (a padded
/// `Host` finds the object, a padded `Range` still leaves the request to the full path), a
/// later HTTP/1 minor version is HTTP/1.1, and a head with more fields than the parts hold
/// takes the full path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_hits_read_the_head_as_the_strict_parser_found_it() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/a").await;
    let one = |head: String| async move {
        let mut stream = TcpStream::connect(shellac.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        read_responses(&mut stream, 1).await
    };
    let padded =
        one("GET /a HTTP/1.1\r\nHost: \t test.example \t\r\nUser-Agent:  t \r\n\r\n".into()).await;
    assert!(padded.ends_with("body of /a"), "{padded}");
    let later = one("GET /a HTTP/1.2\r\nhost: test.example\r\n\r\n".into()).await;
    assert!(
        later.starts_with("HTTP/1.1 200") && later.ends_with("body of /a"),
        "{later}"
    );
    assert_eq!(shellac.stat("cache_hit_fast").await, 2);
    let ranged = exchange(
        shellac.addr,
        b"GET /a HTTP/1.1\r\nhost: test.example\r\nRange: \tbytes=0-3 \r\n\r\n",
        Duration::from_millis(500),
    )
    .await;
    assert!(ranged.text.starts_with("HTTP/1.1 206"), "{}", ranged.text);
    let many: String = (0..40).map(|i| format!("X-F{i}: {i}\r\n")).collect();
    let full = one(format!(
        "GET /a HTTP/1.1\r\nhost: test.example\r\n{many}\r\n"
    ))
    .await;
    assert!(full.ends_with("body of /a"), "{full}");
    let stats = shellac.stats().await;
    assert_eq!(
        stats["cache_hit_fast"], 2,
        "the ranged and the 41-field request"
    );
    assert_eq!(stats["cache_hit"], 4);
    // A value with obs-text: as UTF-8 (the head read as text once) and not (each part read
    // on its own): fast hits both.
    for head in [
        &b"GET /a HTTP/1.1\r\nhost: test.example\r\nUser-Agent: caf\xc3\xa9\r\n\r\n"[..],
        &b"GET /a HTTP/1.1\r\nUser-Agent: caf\xe9\r\nhost: test.example\r\n\r\n"[..],
    ] {
        let r = exchange(shellac.addr, head, Duration::from_millis(500)).await;
        assert!(r.text.starts_with("HTTP/1.1 200"), "{}", r.text);
        assert!(r.text.ends_with("body of /a"), "{}", r.text);
    }
    assert_eq!(shellac.stat("cache_hit_fast").await, 4);
    shellac.stop().await;
}

/// With operator rules (examples/wordpress-apache.toml): a page no rule answers or edits is
/// a fast hit (the response-phase rules and `cache` change nothing on a hit); so is a static
/// file, whose rule strips the request's cookies (they change nothing here: the URL does not
/// vary on them and the log does not print them); a logged-in visitor's request is passed by
/// its rule, static file or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_that_would_act_keep_their_requests_on_the_full_path() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start_file("examples/wordpress-apache.toml", origin.addr, |_| {}).await;
    for path in ["/a", "/style.css"] {
        assert!(
            get(shellac.addr, path)
                .await
                .cache_status()
                .contains("fwd=miss")
        );
    }
    assert!(get(shellac.addr, "/a").await.cache_status().contains("hit"));
    let css = get_with(shellac.addr, "/style.css", &[("cookie", "theme=dark")]).await;
    assert!(css.cache_status().contains("hit"), "{}", css.cache_status());
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        2,
        "the page and the static file"
    );
    for path in ["/a", "/style.css"] {
        let r = get_with(shellac.addr, path, &[("cookie", "wordpress_logged_in_x=1")]).await;
        assert!(
            r.cache_status().contains("fwd=request"),
            "{path}: {}",
            r.cache_status()
        );
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_hit_fast"], 2);
    assert_eq!(stats["cache_hit"], 2);
    shellac.stop().await;
}

/// Where cookies matter to a hit (here: the access log prints them), a rule that strips them
/// keeps its requests on the full path, which logs what the rule left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookie_stripping_rule_counts_where_cookies_are_logged() {
    let dir = TempDir::new("fast-cookie-log");
    let log = dir.path("access.log");
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let log_path = log.to_str().unwrap().to_string();
    let shellac = Shellac::start_file("examples/wordpress-apache.toml", origin.addr, |c| {
        c.log.access_log = log_path;
        c.log.format = "%r %{Cookie}i".to_string();
    })
    .await;
    get(shellac.addr, "/style.css").await;
    let css = get_with(shellac.addr, "/style.css", &[("cookie", "theme=dark")]).await;
    assert!(css.cache_status().contains("hit"), "{}", css.cache_status());
    assert_eq!(shellac.stat("cache_hit_fast").await, 0);
    let lines = wait_lines(&log, 2).await;
    assert!(
        lines.iter().all(|l| l.ends_with(" -")),
        "cookies stripped before logging: {lines:?}"
    );
    shellac.stop().await;
}

/// A request's `Cache-Control` and `Pragma` count only with `cache.request_cache_control`
/// (off by default): without it a browser's `max-age=0` or `no-cache` gets a fast hit, as the
/// full path would give it a hit; `no-store` is passed either way. With it, the full path
/// decides (here: revalidates).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_cache_control_counts_only_when_configured() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let default = Shellac::start(origin.addr, |_| {}).await;
    get(default.addr, "/a").await;
    for field in [
        ("cache-control", "max-age=0"),
        ("cache-control", "no-cache"),
        ("pragma", "no-cache"),
    ] {
        let r = get_with(default.addr, "/a", &[field]).await;
        assert!(r.cache_status().contains("hit"), "{field:?}");
    }
    assert_eq!(default.stat("cache_hit_fast").await, 3);
    let no_store = get_with(
        default.addr,
        "/a",
        &[("cache-control", "max-age=5, no-store")],
    )
    .await;
    assert!(
        no_store.cache_status().contains("fwd=request"),
        "{}",
        no_store.cache_status()
    );
    assert_eq!(default.stat("cache_hit_fast").await, 3);
    assert_eq!(origin.count(), 2);

    let strict = Shellac::start(origin.addr, |c| c.cache.request_cache_control = true).await;
    get(strict.addr, "/a").await;
    let r = get_with(strict.addr, "/a", &[("cache-control", "no-cache")]).await;
    assert!(r.cache_status().contains("fwd="), "{}", r.cache_status());
    assert_eq!(strict.stat("cache_hit_fast").await, 0);
    default.stop().await;
    strict.stop().await;
}

/// A fast hit's access-log line is the one the full path writes for the same hit: request
/// line, host, request and response fields, decision (the record is built by the same code
/// from the request head's bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_hits_log_line_is_the_full_paths() {
    let dir = TempDir::new("fast-log-line");
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let format = "%h %r %s %b %{host}x %{User-agent}i %{Referer}i %{X-Absent}i \
                  %{Cache-Status}o %{Content-Type}o %{cache}x %{reason}x %{backend}x";
    let mut lines = Vec::new();
    for (name, fast) in [("fast", true), ("full", false)] {
        let log = dir.path(&format!("{name}.log"));
        let log_path = log.to_str().unwrap().to_string();
        let shellac = Shellac::start(origin.addr, |c| {
            c.server.fast_hits = fast;
            c.log.access_log = log_path;
            c.log.format = format.to_string();
        })
        .await;
        get(shellac.addr, "/a?q=1").await;
        let hit = get_with(
            shellac.addr,
            "/a?q=1",
            &[("user-agent", "t/1"), ("referer", "http://r.test/")],
        )
        .await;
        assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
        assert_eq!(shellac.stat("cache_hit_fast").await, u64::from(fast));
        let mut got = wait_lines(&log, 2).await;
        // Cache-Status carries the remaining TTL, which may differ by a second.
        let line = got.remove(1);
        let ttl = line.find("ttl=").unwrap();
        let end = ttl + line[ttl..].find(' ').unwrap();
        lines.push(format!("{}ttl={}", &line[..ttl], &line[end..]));
        shellac.stop().await;
    }
    assert_eq!(lines[0], lines[1]);
    assert!(
        lines[0].contains("GET /a?q=1 HTTP/1.1 200 "),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(" 200 14 test.example t/1 http://r.test/ - shellac; hit; "),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(" hit - -"), "{}", lines[0]);
}
