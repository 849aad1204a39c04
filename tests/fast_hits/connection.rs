//! Fast hits on a connection: pipelined answers in request order, a large one through partial
//! writes, the send timeout, release and resume, the connection's clocks and the hand-over to
//! hyper, a refusal after them, a head in pieces, the head as the strict parser found it.

use super::*;

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
    // And one more while the slow one is still in flight: written once the origin holds
    // `/slow` (its 300 ms delay), not after a fixed sleep a loaded machine can outlast.
    assert!(
        eventually(Duration::from_secs(10), || async {
            origin.count_path("/slow") == 1
        })
        .await,
        "/slow reached the origin"
    );
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

/// A large fast hit goes out in vectored writes of many stored chunks at once; a reader with a
/// small window takes them in small, partial writes. Every byte arrives once, in order, followed
/// by the next response on the same connection, and is counted once (`s_resp_bytes`).
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
    // Written from the stored chunks in pieces that cut them anywhere: every body byte
    // counted once (the two misses' and the two hits').
    assert_eq!(
        shellac.stat("s_resp_bytes").await,
        2 * (want.len() as u64 + 10)
    );
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
