//! `[[backend]] protocol = "files"`: static files from a document root behind the same cache
//! policy as any origin — types, validators, conditionals and ranges (cached and passed),
//! index files, precompressed siblings, and the refusals that keep requests inside the root.

mod common;
#[path = "static_files/default_type.rs"]
mod default_type;
#[path = "static_files/open_file_cache.rs"]
mod open_file_cache;
#[path = "static_files/precompressed.rs"]
mod precompressed;
#[path = "static_files/seeks.rs"]
mod seeks;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::binary::BIN;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-ROOT";

/// A document root (`www/`) next to a file outside it (`secret.txt`).
fn site() -> TempDir {
    let dir = TempDir::new("files");
    let www = dir.0.join("www");
    let w = |p: &str, body: &[u8]| {
        let path = www.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_old(&path, body);
    };
    w("app.js", b"console.log(1);\n");
    w("mod.mjs", b"export {};\n");
    w("data.json", b"{\"a\":1}");
    w("text.txt", b"0123456789abcdefghijklmnopqrstuvwxyz");
    w("docs/index.html", b"<h1>docs</h1>");
    w("empty/.keep", b"");
    w(".env", b"PASSWORD=1");
    w(".well-known/security.txt", b"Contact: x");
    w("style.css", b"body{color:red}");
    w("style.css.gz", b"GZIP-BYTES");
    w("style.css.br", b"BROTLI-BYTES");
    w("noext", b"raw");
    std::fs::write(dir.0.join("secret.txt"), SECRET).unwrap();
    std::os::unix::fs::symlink(dir.0.join("secret.txt"), www.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(www.join("text.txt"), www.join("inside.txt")).unwrap();
    dir
}

/// Writes `body` to `path`, modified long ago (2020): the Last-Modified heuristic keeps a
/// cached copy fresh for months, so whether a request is a hit or a revalidation never depends
/// on the test's timing.
fn write_old(path: &Path, body: &[u8]) {
    std::fs::write(path, body).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_577_836_800))
        .unwrap();
}

async fn files(root: &Path, tweak: impl FnOnce(&mut shellac::config::BackendConfig)) -> Shellac {
    Shellac::start_files(root, |c| {
        let b = &mut c.backends[0];
        b.precompressed = true;
        tweak(b);
        // `X-Pass: 1`: the request is passed (never cached), so the files origin itself
        // answers its conditionals and ranges.
        c.rules.push(pass_rule());
    })
    .await
}

/// A passed request: the origin itself answers conditionals and ranges.
const PASS: (&str, &str) = ("x-pass", "1");

/// The rule that passes a request with an `X-Pass` header ([`PASS`]).
fn pass_rule() -> shellac::config::rules::RuleConfig {
    let mut pass = shellac::config::rules::RuleConfig::default();
    pass.request_header.insert("x-pass".into(), String::new());
    pass.pass = true;
    pass
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_served_with_types_and_validators() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    for (path, ty, body) in [
        ("/app.js", "text/javascript", "console.log(1);\n"),
        ("/mod.mjs", "text/javascript", "export {};\n"),
        ("/data.json", "application/json", "{\"a\":1}"),
        ("/noext", "application/octet-stream", "raw"),
    ] {
        let r = get(sh.addr, path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(ty), "{path}");
        assert_eq!(r.text(), body, "{path}");
        assert!(r.header("etag").is_some_and(|e| e.starts_with('"')));
        assert!(r.header("last-modified").is_some());
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
    }
    let head = request(sh.addr, "HEAD", "/text.txt", &[PASS], b"").await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("36"));
    assert!(head.body.is_empty());
    let post = request(sh.addr, "POST", "/text.txt", &[], b"x").await;
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
    assert_eq!(get(sh.addr, "/missing.txt").await.status, 404);
    // The open-file cache answered the second look-up of a path.
    get(sh.addr, "/app.js?again").await;
    let v: serde_json::Value =
        serde_json::from_slice(&get(sh.admin, "/backends").await.body).unwrap();
    let b = &v["backends"][0];
    assert!(b["files_cache_hit"].as_u64().unwrap() >= 1, "{b}");
    assert!(b["files_cache_miss"].as_u64().unwrap() >= 1, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_get_their_index_a_slash_or_403() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    let r = get(sh.addr, "/docs?x=1").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/docs/?x=1"));
    let r = get(sh.addr, "/docs/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>docs</h1>"));
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(
        get(sh.addr, "/empty/").await.status,
        403,
        "no index, no listing"
    );
    assert_eq!(get(sh.addr, "/text.txt/").await.status, 404);
}

/// Conditionals and ranges, passed (answered by the files origin) and cached (answered by
/// the proxy from the stored copy): the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditionals_and_ranges_passed_and_cached() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    let first = get(sh.addr, "/text.txt").await;
    let etag = first.header("etag").unwrap().to_string();
    let lm = first.header("last-modified").unwrap().to_string();
    for pass in [true, false] {
        let with = |h: &[(&'static str, &str)]| {
            let mut v: Vec<(&str, String)> = h.iter().map(|(k, v)| (*k, v.to_string())).collect();
            if pass {
                v.push((PASS.0, PASS.1.to_string()));
            }
            v
        };
        let send = |h: Vec<(&'static str, String)>| async move {
            let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            get_with(sh.addr, "/text.txt", &h).await
        };
        let r = send(with(&[("if-none-match", &etag)])).await;
        assert_eq!(r.status, 304, "pass={pass}");
        let r = send(with(&[("if-modified-since", &lm)])).await;
        assert_eq!(r.status, 304, "pass={pass}");
        let r = send(with(&[("if-match", "\"other\"")])).await;
        assert_eq!(r.status, 412, "pass={pass}");
        let r = send(with(&[("range", "bytes=0-3")])).await;
        assert_eq!((r.status, r.text().as_str()), (206, "0123"), "pass={pass}");
        assert_eq!(r.header("content-range"), Some("bytes 0-3/36"));
        let r = send(with(&[("range", "bytes=0-1,-2")])).await;
        assert_eq!(r.status, 206, "pass={pass}");
        let ct = r.header("content-type").unwrap();
        assert!(ct.starts_with("multipart/byteranges; boundary="), "{ct}");
        let text = r.text();
        assert!(
            text.contains("Content-Range: bytes 0-1/36\r\n\r\n01\r\n"),
            "{text}"
        );
        assert!(
            text.contains("Content-Range: bytes 34-35/36\r\n\r\nyz\r\n"),
            "{text}"
        );
        assert_eq!(
            r.header("content-length"),
            Some(r.body.len().to_string().as_str())
        );
        let r = send(with(&[("range", "bytes=100-")])).await;
        assert_eq!(r.status, 416, "pass={pass}");
        assert_eq!(r.header("content-range"), Some("bytes */36"));
        let r = send(with(&[("range", "bytes=0-3"), ("if-range", "\"stale\"")])).await;
        assert_eq!((r.status, r.body.len()), (200, 36), "pass={pass}");
        let r = send(with(&[("range", "bytes=0-3"), ("if-range", &etag)])).await;
        assert_eq!(r.status, 206, "pass={pass}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precompressed_siblings_by_accept_encoding_with_vary() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    for (ae, body, ce) in [
        ("br, gzip", "BROTLI-BYTES", Some("br")),
        ("gzip", "GZIP-BYTES", Some("gzip")),
        ("identity", "body{color:red}", None),
    ] {
        let r = get_with(sh.addr, "/style.css", &[("accept-encoding", ae), PASS]).await;
        assert_eq!(r.status, 200, "{ae}");
        assert_eq!(r.text(), body, "{ae}");
        assert_eq!(r.header("content-encoding"), ce, "{ae}");
        assert_eq!(r.header("content-type"), Some("text/css"), "{ae}");
        assert!(
            r.header("vary")
                .is_some_and(|v| v.contains("Accept-Encoding")),
            "{ae}"
        );
    }
    let r = get_with(sh.addr, "/app.js", &[("accept-encoding", "gzip"), PASS]).await;
    assert_eq!(r.header("vary"), None, "no sibling, no Vary");
}

/// Raw request lines, so no client library tidies the path first.
async fn raw_status(addr: std::net::SocketAddr, target: &str) -> (u16, String) {
    let text = raw(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traversal_in_every_spelling_never_leaves_the_root() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    for target in [
        "/../secret.txt",
        "/docs/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/.%2e/secret.txt",
        "/docs/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/%c0%ae%c0%ae/secret.txt",
        "/docs/..%c0%af..%c0%afsecret.txt",
        "/%e0%80%ae%e0%80%ae/secret.txt",
        "/..%5csecret.txt",
        "/docs\\..\\..\\secret.txt",
        "/docs%5c..%5c..%5csecret.txt",
        "/text.txt%00.js",
        "/text%0a.txt",
        "/text.txt%2f",
        "/escape.txt",
    ] {
        let (status, text) = raw_status(sh.addr, target).await;
        assert!(status == 400 || status == 404, "{target}: {status}\n{text}");
        assert!(!text.contains(SECRET), "{target} leaked the file");
    }
    // A link that stays inside the root is followed.
    assert_eq!(raw_status(sh.addr, "/inside.txt").await.0, 200);
    // Dotfiles are not served; .well-known is.
    assert_eq!(raw_status(sh.addr, "/.env").await.0, 404);
    assert_eq!(raw_status(sh.addr, "/%2eenv").await.0, 404);
    assert_eq!(
        raw_status(sh.addr, "/.well-known/security.txt").await.0,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_out_and_dotfiles_only_when_the_operator_says() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |b| {
        b.follow_symlinks = true;
        b.dotfiles = true;
    })
    .await;
    let r = get(sh.addr, "/escape.txt").await;
    assert_eq!((r.status, r.text().as_str()), (200, SECRET));
    assert_eq!(get(sh.addr, "/.env").await.status, 200);
    // Still never `..`.
    assert_eq!(raw_status(sh.addr, "/../secret.txt").await.0, 400);
}

/// A file this process cannot read is 403. Run as root (CAP_DAC_OVERRIDE), every file is
/// readable: the case is then made by a FIFO, which is never served (404) and never blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_files_and_special_files_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = site();
    let www = dir.0.join("www");
    let locked = www.join("locked.txt");
    std::fs::write(&locked, "x").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let fifo = www.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let sh = files(&www, |_| {}).await;
    let status = get(sh.addr, "/locked.txt").await.status;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(status, 200, "root reads every file");
        // The same file served by a Shellac that is not root (as a packaged one runs): 403.
        if let Some(setpriv) = tools::require(tools::which("setpriv"), "setpriv", "util-linux") {
            let config = dir.0.join("nobody.toml");
            std::fs::write(
                &config,
                format!(
                    "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[[backend]]\nprotocol = \"files\"\nroot = \"{}\"\n",
                    www.display()
                ),
            )
            .unwrap();
            let mut cmd = Command::new(setpriv);
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
                .args(["serve", "--config"])
                .arg(&config);
            let served = common::binary::Served::start(cmd);
            assert_eq!(get(served.proxy, "/locked.txt").await.status, 403);
            assert_eq!(get(served.proxy, "/text.txt").await.status, 200);
            served.stop();
        }
    } else {
        assert_eq!(status, 403);
    }
    assert_eq!(get(sh.addr, "/pipe").await.status, 404);
}

/// A file truncated while it is sent: the client's connection is closed before the length
/// announced, never a complete-looking response of other bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_shrinks_while_sent_closes_the_connection() {
    let dir = site();
    let www = dir.0.join("www");
    let big = www.join("big.bin");
    // Sparse: 64 MiB that take no disk and read as zeros.
    let len: u64 = 64 << 20;
    std::fs::File::create(&big).unwrap().set_len(len).unwrap();
    let sh = files(&www, |_| {}).await;
    let mut stream = connect_small_window(sh.addr).await;
    stream
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nX-Pass: 1\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1);
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    assert!(head.contains(&format!("content-length: {len}")), "{head}");
    std::fs::File::options()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(1000)
        .unwrap();
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection was not closed");
    assert!(got < len, "a body of {got} bytes for a length of {len}");
    // Cleartext HTTP/1.1: the file went out by sendfile, which found it shorter.
    assert!(sh.stat("sendfile_bytes").await > 0, "not sent by sendfile");
}

/// Bytes that differ at every offset (a shifted or misplaced region shows).
fn patterned(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
        .collect()
}

/// Large files passed to a cleartext HTTP/1.1 client go out by sendfile(2): whole, one range,
/// several ranges (boundaries written between the regions), twice on one keep-alive
/// connection, and a small file after them; each body exactly the file's bytes, and
/// `sendfile_bytes` counts them. A cached copy is sent from memory, not by sendfile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_files_go_out_by_sendfile_whole_and_in_ranges() {
    let dir = site();
    let www = dir.0.join("www");
    let len = 9 << 20;
    let data = patterned(len);
    std::fs::write(www.join("large.bin"), &data).unwrap();
    let sh = files(&www, |_| {}).await;
    let mut conn = Conn::open(sh.addr).await;
    let before = sh.stat("sendfile_bytes").await;
    let r = conn.send("GET", "/large.bin", &[PASS], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), len);
    assert!(r.body == data[..], "the body is not the file");
    assert_eq!(sh.stat("sendfile_bytes").await - before, len as u64);

    let r = conn
        .send(
            "GET",
            "/large.bin",
            &[PASS, ("range", "bytes=1000-5000999")],
            b"",
        )
        .await;
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 1000-5000999/{len}").as_str())
    );
    assert!(
        r.body == data[1000..5_001_000],
        "the range is not the file's"
    );

    let r = conn
        .send(
            "GET",
            "/large.bin",
            &[PASS, ("range", "bytes=10-100009,6000000-6099999")],
            b"",
        )
        .await;
    assert_eq!(r.status, 206);
    let ct = r.header("content-type").unwrap().to_string();
    let boundary = ct.split("boundary=").nth(1).unwrap().to_string();
    let mut want = Vec::new();
    for (start, end) in [(10usize, 100_009usize), (6_000_000, 6_099_999)] {
        want.extend_from_slice(
            format!(
                "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes {start}-{end}/{len}\r\n\r\n"
            )
            .as_bytes(),
        );
        want.extend_from_slice(&data[start..=end]);
    }
    want.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    assert!(
        r.body == want,
        "the multipart body is not the file's ranges"
    );

    // The connection goes on: a small file (read, not sent by sendfile) after them.
    let sent = sh.stat("sendfile_bytes").await;
    assert_eq!(sent - before, len as u64 + 5_000_000 + 200_000);
    let r = conn.send("GET", "/text.txt", &[PASS], b"").await;
    assert_eq!(r.text(), "0123456789abcdefghijklmnopqrstuvwxyz");
    assert_eq!(sh.stat("sendfile_bytes").await, sent);

    // Cached: filled from the file, then sent from the stored copy.
    for _ in 0..2 {
        let r = conn.send("GET", "/large.bin", &[], b"").await;
        assert!(r.body == data[..], "the cached body is not the file");
    }
    assert_eq!(sh.stat("sendfile_bytes").await, sent);
}

/// A file changed in place (same length, new modification time) while sendfile sends it: the
/// connection is closed before the last bytes, never a complete body of two versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_while_sent_by_sendfile_closes_the_connection() {
    let dir = site();
    let www = dir.0.join("www");
    let big = www.join("big.bin");
    let len: u64 = 64 << 20;
    std::fs::File::create(&big).unwrap().set_len(len).unwrap();
    let sh = files(&www, |_| {}).await;
    let mut stream = connect_small_window(sh.addr).await;
    stream
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nX-Pass: 1\r\n\r\n")
        .await
        .unwrap();
    let mut first = vec![0u8; 1024];
    assert!(stream.read(&mut first).await.unwrap() > 0);
    std::fs::File::options()
        .write(true)
        .open(&big)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + Duration::from_secs(60))
        .unwrap();
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection was not closed");
    assert!(got < len, "a body of {got} bytes for a length of {len}");
    assert!(sh.stat("sendfile_bytes").await > 0, "not sent by sendfile");
}

/// `shellac check` names the key and line of a document root that is not a directory and of
/// a Unix socket path whose directory does not exist.
#[test]
fn check_refuses_a_bad_root_and_socket() {
    let dir = TempDir::new("files-check");
    let file = dir.0.join("shellac.toml");
    std::fs::write(dir.0.join("plain"), "x").unwrap();
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\n\n[[backend]]\nname = \"static\"\nprotocol = \"files\"\nroot = \"{}\"\n\n[[backend]]\nname = \"app\"\naddress = \"unix:/nonexistent-dir/app.sock\"\n",
        dir.0.join("plain").display()
    );
    std::fs::write(&file, text).unwrap();
    let out = Command::new(BIN)
        .args(["check", file.to_str().unwrap()])
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains(":8:1: `backend.0.root`: document root"),
        "{all}"
    );
    assert!(all.contains("is not a directory"), "{all}");
    assert!(all.contains(":12:1: `backend.1.address`:"), "{all}");
    assert!(all.contains("does not exist"), "{all}");
}

/// A files backend (`name`, under `root`) with `try_files`, for the requests whose path
/// matches `path`.
fn routed_files(
    c: &mut shellac::config::Config,
    name: &str,
    root: &Path,
    try_files: &[&str],
    path: &str,
) {
    let mut b = shellac::config::BackendConfig::new(name, "", 80);
    b.protocol = shellac::config::BackendProtocol::Files;
    b.root = Some(root.to_path_buf());
    b.try_files = try_files.iter().map(|s| s.to_string()).collect();
    c.backends.push(b);
    c.rules.push(shellac::config::rules::RuleConfig {
        path: Some(path.to_string()),
        director: Some(name.to_string()),
        ..Default::default()
    });
}

/// nginx's `try_files`: the first path that names a file (or, ending in `/`, a directory)
/// is served; else the fallback: another backend with the request unchanged, a status, or a
/// file of the root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_files_serves_the_first_that_exists_else_the_fallback() {
    let dir = site();
    let www = dir.0.join("www");
    std::fs::write(www.join("about.html"), "<p>about</p>").unwrap();
    let app = Origin::start(|s| Reply::ok(&format!("app saw {}", s.path)).cc("no-store")).await;
    let app_addr = app.addr;
    let sh = Shellac::start_files(&www, |c| {
        let b = &mut c.backends[0];
        b.try_files = ["$uri", "$uri.html", "$uri/", "@app"]
            .map(String::from)
            .to_vec();
        c.backends.push(shellac::config::BackendConfig::new(
            "app",
            &app_addr.ip().to_string(),
            app_addr.port(),
        ));
        routed_files(c, "spa", &www, &["$uri", "/docs/index.html"], "^/spa/");
        routed_files(c, "gone", &www, &["$uri", "=410"], "^/gone/");
    })
    .await;
    let r = get(sh.addr, "/app.js").await;
    assert_eq!((r.status, r.text().as_str()), (200, "console.log(1);\n"));
    let r = get(sh.addr, "/about").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "<p>about</p>"),
        "$uri.html"
    );
    assert_eq!(r.header("content-type"), Some("text/html"));
    let r = get(sh.addr, "/docs").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "<h1>docs</h1>"),
        "$uri/"
    );
    let r = get(sh.addr, "/blog/2009/post?p=7").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "app saw /blog/2009/post?p=7"),
        "@app gets the request unchanged"
    );
    assert_eq!(sh.stat("files_try_next").await, 1);
    // What the files origin refuses is refused, not handed on.
    assert_eq!(raw_status(sh.addr, "/.env").await.0, 404);
    assert_eq!(raw_status(sh.addr, "/%2e%2e/secret.txt").await.0, 400);
    assert_eq!(app.count(), 1);
    // A path fallback serves that file; a status fallback answers it.
    let r = get(sh.addr, "/spa/some/route").await;
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>docs</h1>"));
    assert_eq!(get(sh.addr, "/gone/x").await.status, 410);
    assert_eq!(get(sh.addr, "/app.js?gone").await.status, 200);
}

/// `autoindex = true`: a directory without an index is listed — only what would be served,
/// directories first, names HTML-escaped, links percent-encoded and usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_listings_only_when_on_escaped_and_safe() {
    let dir = site();
    let www = dir.0.join("www");
    let list = www.join("list");
    std::fs::create_dir_all(list.join("sub")).unwrap();
    std::fs::write(list.join("a.txt"), "a").unwrap();
    std::fs::write(list.join("<b>&\"c'.txt"), "tricky").unwrap();
    std::fs::write(list.join("javascript:x"), "j").unwrap();
    std::fs::write(list.join(".hidden"), "h").unwrap();
    std::os::unix::fs::symlink(dir.0.join("secret.txt"), list.join("out")).unwrap();
    let sh = files(&www, |b| b.autoindex = false).await;
    assert_eq!(get(sh.addr, "/list/").await.status, 403, "off by default");
    sh.stop().await;
    let sh = files(&www, |b| b.autoindex = true).await;
    let r = get_with(sh.addr, "/list/", &[PASS]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let page = r.text();
    assert!(page.contains("<title>Index of /list/</title>"), "{page}");
    let sub = page.find("href=\"sub/\"").expect("the directory is listed");
    let a = page.find("href=\"a.txt\"").expect("the file is listed");
    assert!(sub < a, "directories first\n{page}");
    assert!(
        page.contains("&lt;b&gt;&amp;&quot;c&#39;.txt</a>"),
        "escaped\n{page}"
    );
    assert!(!page.contains("<b>"), "{page}");
    assert!(page.contains("href=\"javascript%3Ax\""), "{page}");
    assert!(page.contains("href=\"../\""), "{page}");
    assert!(!page.contains("hidden"), "dotfiles are not listed\n{page}");
    assert!(
        !page.contains("out"),
        "links out of the root are not listed\n{page}"
    );
    let link = page
        .split("href=\"")
        .find(|s| s.contains("c%27.txt"))
        .and_then(|s| s.split('"').next())
        .expect("a link to the tricky name")
        .to_string();
    let r = get(sh.addr, &format!("/list/{link}")).await;
    assert_eq!((r.status, r.text().as_str()), (200, "tricky"), "{link}");
    // A directory with an index is still its index; the root is listed without `../`.
    assert_eq!(get(sh.addr, "/docs/").await.text(), "<h1>docs</h1>");
    let root = get_with(sh.addr, "/", &[PASS]).await.text();
    assert!(
        root.contains("href=\"list/\"") && !root.contains("href=\"../\""),
        "{root}"
    );
    let head = request(sh.addr, "HEAD", "/list/", &[PASS], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
}

/// Hotlink protection: a rule's `valid_referers` (403, also for what the cache holds) and
/// `secure_link` signed expiring links (403 wrong, 410 expired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hotlinks_are_refused_and_signed_links_expire() {
    use base64::Engine as _;
    let dir = site();
    let www = dir.0.join("www");
    std::fs::create_dir_all(www.join("img")).unwrap();
    std::fs::create_dir_all(www.join("paid")).unwrap();
    std::fs::write(www.join("img/cat.png"), "PNG").unwrap();
    std::fs::write(www.join("paid/movie.flv"), "FLV-MOVIE").unwrap();
    std::fs::create_dir_all(www.join("s")).unwrap();
    std::fs::write(www.join("s/clip.flv"), "FLV-CLIP").unwrap();
    let sh = Shellac::start_files(&www, |c| {
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some("^/s/".into()),
            secure_link: Some(shellac::config::rules::SecureLinkConfig {
                md5: Some("$secure_link_expires$uri$remote_addr secret".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some("^/img/".into()),
            valid_referers: ["none", "server_names", "*.friend.org"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        });
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some("^/paid/".into()),
            secure_link: Some(shellac::config::rules::SecureLinkConfig {
                secret: Some("k3y".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
    })
    .await;
    let r = get(sh.addr, "/img/cat.png").await;
    assert_eq!((r.status, r.text().as_str()), (200, "PNG"), "no Referer");
    assert_eq!(get(sh.addr, "/img/cat.png").await.status, 200, "a hit");
    let from = |referer: &'static str| [("referer", referer)];
    let r = get_with(sh.addr, "/img/cat.png", &from("http://evil.test/page")).await;
    assert_eq!(r.status, 403, "a stored copy is not a way round it");
    assert!(!r.text().contains("PNG"));
    let r = get_with(sh.addr, "/img/cat.png", &from("https://www.friend.org/x")).await;
    assert_eq!(r.status, 200);
    let r = get_with(
        sh.addr,
        "/img/cat.png",
        &[
            ("host", "www.mysite.test"),
            ("referer", "http://WWW.mysite.test:8080/gallery"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "server_names: the request's own host");
    assert_eq!(
        get(sh.addr, "/app.js").await.status,
        200,
        "other paths: no check"
    );

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"k3y");
    let signed = |path: &str, expires: u64| {
        let mac = ring::hmac::sign(&key, format!("{expires}{path}").as_bytes());
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.as_ref());
        format!("{path}?expires={expires}&sig={sig}")
    };
    let r = get(sh.addr, &signed("/paid/movie.flv", now + 3600)).await;
    assert_eq!((r.status, r.text().as_str()), (200, "FLV-MOVIE"));
    assert_eq!(
        get(sh.addr, &signed("/paid/movie.flv", now - 10))
            .await
            .status,
        410
    );
    let forged = signed("/paid/other.flv", now + 3600).replace("other", "movie");
    assert_eq!(get(sh.addr, &forged).await.status, 403);
    assert_eq!(get(sh.addr, "/paid/movie.flv").await.status, 403);
    // nginx's secure_link_md5 form, signed as nginx's documentation signs it:
    // `echo -n "$expires/s/clip.flv127.0.0.1 secret" | openssl md5 -binary | base64 | tr +/ -_`.
    let md5_signed = |path: &str, expires: u64| {
        let out = std::process::Command::new("md5sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                let mut stdin = child.stdin.take().unwrap();
                write!(stdin, "{expires}{path}127.0.0.1 secret")?;
                drop(stdin);
                child.wait_with_output()
            })
            .expect("md5sum runs");
        let hex = String::from_utf8(out.stdout).unwrap();
        let digest: Vec<u8> = (0..16)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
        format!("{path}?md5={sig}&expires={expires}")
    };
    let r = get(sh.addr, &md5_signed("/s/clip.flv", now + 3600)).await;
    assert_eq!((r.status, r.text().as_str()), (200, "FLV-CLIP"));
    let expired = md5_signed("/s/clip.flv", now - 10);
    assert_eq!(get(sh.addr, &expired).await.status, 410);
    let forged = md5_signed("/s/clip.flv", now + 3600).replace("expires=", "expires=1");
    assert_eq!(get(sh.addr, &forged).await.status, 403);
    assert_eq!(get(sh.addr, "/s/clip.flv").await.status, 403);
    assert_eq!(sh.stat("hotlink_refused").await, 7);
}
