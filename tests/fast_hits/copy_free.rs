//! Stored bodies sent without a copy (`cache/pages.rs`, `server/h1/splice.rs`): bodies of
//! 64 KiB or more go from their mapping to the socket through a pipe on cleartext HTTP/1.1,
//! up to 512 KiB (`cache::pages::LENT_MAX`: a body of megabytes is copied).
//! Every answer must be byte for byte the stored body, in order on a kept-alive connection,
//! whatever the client does: pipelines, HEAD, Range, 304, a small window, a purge while the
//! body is on its way, leaving mid-body.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::common::*;

const SMALL: usize = 68_000;
/// Larger than a pipe (256 KiB), not above the largest body lent (512 KiB).
const LARGE: usize = (480 << 10) | 4321;
/// Above the largest body lent.
const HUGE: usize = (3 << 20) | 4321;

/// Every byte tells its offset (mod 251), so a piece sent twice, skipped or out of order shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A compressible page of ~100 KB: stored gzipped, sent to identity clients from its identity
/// representation once it is hot.
fn html() -> String {
    (0..3000)
        .map(|i| format!("<tr><td>row {i}</td><td>value</td></tr>\n"))
        .collect()
}

fn origin_reply(path: &str) -> Reply {
    if path == "/page.html" {
        return Reply::ok(&html())
            .cc("max-age=60")
            .header("content-type", "text/html; charset=utf-8");
    }
    let len = match path {
        "/small" => SMALL,
        "/large" => LARGE,
        "/huge" => HUGE,
        _ => return Reply::ok("tiny").cc("max-age=60"),
    };
    Reply::ok("")
        .body(ReplyBody::Bytes(pattern(len)))
        .cc("max-age=60")
        .header("etag", "\"p1\"")
        .header("content-type", "application/octet-stream")
}

/// One response read off a raw connection: status and body (`bodiless` for HEAD).
async fn read_response(
    stream: &mut TcpStream,
    pending: &mut Vec<u8>,
    bodiless: bool,
) -> (u16, Vec<u8>) {
    let mut buf = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(at) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf))
            .await
            .expect("a response head")
            .unwrap();
        assert!(
            n > 0,
            "closed before a head: {:?}",
            String::from_utf8_lossy(pending)
        );
        pending.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).to_ascii_lowercase();
    let status: u16 = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let len = if bodiless || status == 304 { 0 } else { len };
    while pending.len() < head_end + len {
        let n = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf))
            .await
            .expect("the body keeps coming")
            .unwrap();
        assert!(
            n > 0,
            "closed mid-body after {} bytes",
            pending.len() - head_end
        );
        pending.extend_from_slice(&buf[..n]);
    }
    let body = pending[head_end..head_end + len].to_vec();
    pending.drain(..head_end + len);
    (status, body)
}

fn get_line(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: test.example\r\n{extra}\r\n")
}

/// Pipelined on one connection: fast hits (GET and HEAD) and full-path answers from the same
/// stored bodies (a Range, a 304), small answers between them. Each is its stored bytes, in
/// request order, and the copy-free counter moved by about the bodies' length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_bodies_go_out_copy_free_byte_exact() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for path in ["/small", "/large", "/tiny"] {
        assert!(
            get(shellac.addr, path)
                .await
                .cache_status()
                .contains("fwd=miss")
        );
    }
    let before = shellac.stat("splice_bytes").await;
    let (small, large) = (pattern(SMALL), pattern(LARGE));
    let mut stream = TcpStream::connect(shellac.addr).await.unwrap();
    let requests = [
        get_line("/small", ""),
        get_line("/large", ""),
        get_line("/tiny", ""),
        get_line("/small", "").replacen("GET", "HEAD", 1),
        get_line("/large", "range: bytes=1000-300999\r\n"),
        get_line("/small", "if-none-match: \"p1\"\r\n"),
        get_line("/small", ""),
    ]
    .concat();
    stream.write_all(requests.as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    let want: [(u16, &[u8], bool); 7] = [
        (200, &small, false),
        (200, &large, false),
        (200, b"tiny", false),
        (200, b"", true),
        (206, &large[1000..301_000], false),
        (304, b"", false),
        (200, &small, false),
    ];
    for (i, (status, body, head)) in want.into_iter().enumerate() {
        let (s, b) = read_response(&mut stream, &mut pending, head).await;
        assert_eq!(s, status, "response {i}");
        assert!(b == body, "response {i}: the stored bytes, byte for byte");
    }
    let lent = shellac.stat("splice_bytes").await - before;
    assert!(
        lent >= (2 * SMALL + LARGE + 300_000) as u64,
        "copy-free bytes {lent}"
    );
    assert!(shellac.stat("cache_hit_fast").await >= 4);
    shellac.stop().await;
}

/// A body of megabytes goes out by copy, whole or in part (lending its pages cost as much CPU
/// as copying them and halved what a client received per second, bench/RESULTS.md
/// "seventeenth stop"): byte exact, on a kept connection, and the copy-free counter does not
/// move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_megabytes_is_copied_whole_or_in_part() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let huge = pattern(HUGE);
    assert_eq!(get(shellac.addr, "/huge").await.body.to_vec(), huge);
    let before = shellac.stat("splice_bytes").await;
    let mut conn = Conn::open(shellac.addr).await;
    for round in 0..3 {
        let r = conn.send("GET", "/huge", &[], b"").await;
        assert!(r.cache_status().contains("hit"), "round {round}");
        assert!(r.body.to_vec() == huge, "round {round}: byte for byte");
    }
    let r = conn
        .send("GET", "/huge", &[("range", "bytes=100-1048675")], b"")
        .await;
    assert_eq!(r.status, 206);
    assert!(
        r.body.to_vec() == huge[100..1_048_676],
        "the range, byte for byte"
    );
    let lent = shellac.stat("splice_bytes").await - before;
    assert_eq!(lent, 0, "copy-free bytes");
    shellac.stop().await;
}

/// An origin, a Shellac in front of it and `/large` stored (fetched once, whole): its bytes.
async fn large_stored() -> (Origin, Shellac, Vec<u8>) {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let large = pattern(LARGE);
    assert_eq!(get(shellac.addr, "/large").await.body.to_vec(), large);
    (origin, shellac, large)
}

/// A reader with a small window takes a large stored body in small pieces while it is purged
/// (its mapping freed once the last piece is in the pipe): every byte arrives, in order,
/// then the next answer on the same connection. A client that leaves mid-body gives its
/// pipe back, and the next client gets the whole body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_gets_the_whole_body_through_a_purge() {
    let (_origin, shellac, large) = large_stored().await;
    let before = shellac.stat("splice_bytes").await;
    let mut slow = connect_small_window(shellac.addr).await;
    let two = [get_line("/large", ""), get_line("/tiny", "")].concat();
    slow.write_all(two.as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    let mut buf = [0u8; 4096];
    while pending.len() < 100_000 {
        let n = tokio::time::timeout(Duration::from_secs(20), slow.read(&mut buf))
            .await
            .expect("bytes")
            .unwrap();
        assert!(n > 0);
        pending.extend_from_slice(&buf[..n]);
    }
    let purged = request(shellac.addr, "PURGE", "/large", &[], b"").await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    let (status, body) = read_response(&mut slow, &mut pending, false).await;
    assert_eq!(status, 200);
    assert!(
        body == large,
        "the whole body, byte for byte, after the purge"
    );
    let (status, body) = read_response(&mut slow, &mut pending, false).await;
    assert_eq!(
        (status, &body[..]),
        (200, &b"tiny"[..]),
        "then the next answer"
    );
    assert!(shellac.stat("splice_bytes").await - before >= (LARGE / 2) as u64);

    // Fetched again; a client leaves after a few bytes of it.
    assert_eq!(get(shellac.addr, "/large").await.body.to_vec(), large);
    let mut leaving = connect_small_window(shellac.addr).await;
    leaving
        .write_all(get_line("/large", "").as_bytes())
        .await
        .unwrap();
    let n = leaving.read(&mut buf).await.unwrap();
    assert!(n > 0);
    drop(leaving);
    let mut conn = Conn::open(shellac.addr).await;
    for _ in 0..3 {
        assert_eq!(
            conn.send("GET", "/large", &[], b"").await.body.to_vec(),
            large
        );
    }
    // Every pipe goes back once its connection is done (the count is the process's: other
    // tests of this binary may hold one for a moment).
    assert!(
        eventually(Duration::from_secs(10), || async {
            shellac.stat("n_splice_pipe").await == 0
        })
        .await,
        "pipes given back"
    );
    shellac.stop().await;
}

/// Regression (the lean loop, eedcef7): a fast hit's write is done once its bytes are in the
/// connection's pipe; when the last of a large body went in while the socket was full, nothing
/// more was written on that connection and nothing sent the pipe's bytes on, so the client
/// waited until the send timeout cut the body (tests/connections
/// `near_clients_get_the_send_buffer_and_large_hits_whole` failed so under load). A reader with
/// a small window, one request at a time (no later answer to push the pipe), gets every body
/// whole, then the next answer on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_window_reader_of_a_lone_large_hit_gets_all_of_it() {
    let (_origin, shellac, large) = large_stored().await;
    let before = shellac.stat("splice_bytes").await;
    let mut slow = connect_small_window(shellac.addr).await;
    let mut pending = Vec::new();
    for round in 0..3 {
        slow.write_all(get_line("/large", "").as_bytes())
            .await
            .unwrap();
        // Let the pipe and the socket fill before reading.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, body) = read_response(&mut slow, &mut pending, false).await;
        assert_eq!(status, 200);
        assert!(
            body == large,
            "round {round}: the whole body, byte for byte"
        );
    }
    slow.write_all(get_line("/tiny", "").as_bytes())
        .await
        .unwrap();
    let (status, body) = read_response(&mut slow, &mut pending, false).await;
    assert_eq!(
        (status, &body[..]),
        (200, &b"tiny"[..]),
        "then the next answer"
    );
    assert!(shellac.stat("splice_bytes").await - before >= (3 * LARGE / 2) as u64);
    assert_eq!(shellac.stat("client_send_timeout").await, 0);
    shellac.stop().await;
}

/// Regression (bench/ab2009.sh phpcached: the identity representation of a hot gzip page was
/// a heap vector, so its hits were copied into the socket): the identity representation is
/// stored as any body, in a mapping of its own, and its hits go out copy-free, byte exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_representation_goes_out_copy_free() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let page = html();
    let gz = get_with(shellac.addr, "/page.html", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    let built = eventually(Duration::from_secs(10), || async {
        assert_eq!(get(shellac.addr, "/page.html").await.text(), page);
        shellac.stat("compress_identity").await == 1
    })
    .await;
    assert!(built, "an identity representation is built");
    let before = shellac.stat("splice_bytes").await;
    let mut conn = Conn::open(shellac.addr).await;
    for _ in 0..3 {
        let r = conn.send("GET", "/page.html", &[], b"").await;
        assert!(r.header("content-encoding").is_none());
        assert_eq!(r.text(), page);
    }
    assert!(
        shellac.stat("splice_bytes").await - before >= 3 * page.len() as u64,
        "sent copy-free"
    );
    shellac.stop().await;
}

/// bench/ab2009.sh phpcached: a stored gzip page's identity representation answers a client
/// without gzip as a fast hit — the full path's answer (status, fields, body), copy-free —
/// and neither path sends the representation's `shellac-source` field (regression: it
/// leaked to every client the representation answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_representation_is_a_fast_hit_like_the_full_paths() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let fast = Shellac::start(origin.addr, |_| {}).await;
    let full = Shellac::start(origin.addr, |c| c.server.fast_hits = false).await;
    let page = html();
    for shellac in [&fast, &full] {
        let gz = get_with(shellac.addr, "/page.html", &[("accept-encoding", "gzip")]).await;
        assert_eq!(gz.header("content-encoding"), Some("gzip"));
        let built = eventually(Duration::from_secs(10), || async {
            assert_eq!(get(shellac.addr, "/page.html").await.text(), page);
            shellac.stat("compress_identity").await == 1
        })
        .await;
        assert!(built, "an identity representation is built");
    }
    let fast_before = fast.stats().await;
    for method in ["GET", "HEAD"] {
        let a = request(
            fast.addr,
            method,
            "/page.html",
            &[("user-agent", "t/1")],
            b"",
        )
        .await;
        let b = request(
            full.addr,
            method,
            "/page.html",
            &[("user-agent", "t/1")],
            b"",
        )
        .await;
        assert_eq!(a.header("shellac-source"), None, "{method}");
        assert_eq!(b.header("shellac-source"), None, "{method}");
        assert!(a.header("content-encoding").is_none());
        assert_eq!(super::shape(&a), super::shape(&b), "{method}");
    }
    let f = fast.stats().await;
    assert_eq!(f["cache_hit_fast"] - fast_before["cache_hit_fast"], 2);
    assert_eq!(
        f["compress_encoded_served"] - fast_before["compress_encoded_served"],
        2
    );
    assert!(
        f["splice_bytes"] - fast_before["splice_bytes"] >= page.len() as u64,
        "the fast GET went out copy-free"
    );
    // A gzip client still gets the stored gzip page, fast.
    let gz = get_with(fast.addr, "/page.html", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.header("shellac-source"), None);
    assert_eq!(fast.stat("cache_hit_fast").await, f["cache_hit_fast"] + 1);
    fast.stop().await;
    full.stop().await;
}

/// A body sent again and again lends its pages each time (`cache/pages/pipe.rs`): its hits
/// stay byte exact, and once the object is purged and fetched again with other bytes, the
/// hits send the new bytes, never the old mapping's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refetched_body_is_lent_with_its_new_bytes() {
    let version = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let v = version.clone();
    let origin = Origin::start(move |_| {
        let n = v.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body: Vec<u8> = (0..SMALL).map(|i| ((i + 7 * n) % 251) as u8).collect();
        Reply::ok("")
            .body(ReplyBody::Bytes(body))
            .cc("max-age=60")
            .header("content-type", "application/octet-stream")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let want = |n: usize| -> Vec<u8> { (0..SMALL).map(|i| ((i + 7 * n) % 251) as u8).collect() };
    for n in 0..2 {
        assert_eq!(
            get(shellac.addr, "/held").await.body.to_vec(),
            want(n),
            "miss {n}"
        );
        let lent_before = shellac.stat("splice_bytes").await;
        let mut conn = Conn::open(shellac.addr).await;
        for i in 0..4 {
            let r = conn.send("GET", "/held", &[], b"").await;
            assert!(r.cache_status().contains("hit"), "hit {i} of version {n}");
            assert!(
                r.body.to_vec() == want(n),
                "hit {i} of version {n}: its bytes"
            );
        }
        // Every hit lent (the counter is the process's: other tests of this binary may lend
        // bodies too, never fewer bytes than these).
        assert!(
            shellac.stat("splice_bytes").await - lent_before >= 4 * SMALL as u64,
            "version {n}: its hits went out copy-free"
        );
        let purged = request(shellac.addr, "PURGE", "/held", &[], b"").await;
        assert_eq!(purged.status, 200, "{}", purged.text());
    }
    assert_eq!(version.load(std::sync::atomic::Ordering::SeqCst), 2);
    shellac.stop().await;
}

/// Holds pipes as `uid` until the kernel shrinks new ones (the user past
/// `fs.pipe-user-pages-soft`), then waits for its stdin to close.
const PIPE_HOG: &str = r#"
import fcntl, os, sys
F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032
held = []
for _ in range(4096):
    r, w = os.pipe()
    held.append((r, w))
    if fcntl.fcntl(w, F_GETPIPE_SZ) < 65536:
        print("shrunk", len(held), flush=True)
        break
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
    except OSError:
        pass
else:
    print("never shrunk", flush=True)
sys.stdin.read()
"#;

/// A child killed (and reaped) when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Shellac that is not root shares the kernel's pipe allowance of its user
/// (`fs.pipe-user-pages-soft`): past it, new pipes have two pages. Such a pipe is not lent:
/// the hits of a body of 64 KiB or more go out by copy, byte for byte, and `splice_fallback`
/// counts them (`splice_bytes` stays 0, no pipe is lent or held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_users_pipe_allowance_bodies_are_copied_byte_exact() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run shellac as another user");
        return;
    }
    let soft = std::fs::read_to_string("/proc/sys/fs/pipe-user-pages-soft")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if soft == 0 {
        eprintln!("skipped: fs.pipe-user-pages-soft is 0 (no allowance)");
        return;
    }
    let Some(setpriv) = tools::require(tools::which("setpriv"), "setpriv", "util-linux") else {
        return;
    };
    // The system's (one under root's home, such as pyenv's, is not the other user's to run).
    let system = std::path::PathBuf::from("/usr/bin/python3");
    let python = system
        .is_file()
        .then_some(system)
        .or_else(|| tools::which("python3"));
    let Some(python) = tools::require(python, "python3", "python3") else {
        return;
    };
    // A user of its own (no other process of this test run shares its allowance).
    let uid = (61_000 + std::process::id() % 4_000).to_string();
    let as_user = |program: &std::path::Path| {
        let mut cmd = std::process::Command::new(&setpriv);
        cmd.args(["--reuid", &uid, "--regid", &uid, "--clear-groups"])
            .arg(program);
        cmd
    };
    let mut hog = as_user(&python);
    hog.args(["-c", PIPE_HOG])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut hog = Child(hog.spawn().expect("start the pipe hog"));
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(hog.0.stdout.take().unwrap()),
        &mut said,
    )
    .unwrap();
    assert!(said.starts_with("shrunk"), "the hog says {said:?}");

    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let dir = TempDir::new("pipe-allowance");
    let config = dir.0.join("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n\
             [[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            origin.addr.port()
        ),
    )
    .unwrap();
    let mut cmd = as_user(std::path::Path::new(binary::BIN));
    cmd.args(["serve", "--config"]).arg(&config);
    let served = binary::Served::start(cmd);
    let small = pattern(SMALL);
    let first = get(served.proxy, "/small").await;
    assert!(first.cache_status().contains("fwd=miss"));
    assert!(first.body == small, "the miss: the origin's bytes");
    let mut stream = TcpStream::connect(served.proxy).await.unwrap();
    let mut pending = Vec::new();
    for i in 0..3 {
        stream
            .write_all(get_line("/small", "").as_bytes())
            .await
            .unwrap();
        let (status, body) = read_response(&mut stream, &mut pending, false).await;
        assert_eq!(status, 200, "hit {i}");
        assert!(body == small, "hit {i}: the stored bytes, byte for byte");
    }
    let resp = get(served.admin, "/stats").await;
    let stats: std::collections::HashMap<String, serde_json::Value> =
        serde_json::from_slice(&resp.body).expect("stats JSON");
    let stat = |name: &str| stats.get(name).and_then(|v| v.as_u64()).unwrap();
    assert!(stat("cache_hit") >= 3);
    assert!(stat("splice_fallback") >= 3, "{}", stat("splice_fallback"));
    assert_eq!(stat("splice_bytes"), 0);
    assert_eq!(stat("n_splice_pipe"), 0);
    served.stop();
    drop(hog);
}
