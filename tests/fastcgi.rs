//! `[[backend]] protocol = "fastcgi"` against Debian's php8.2-fpm: one php-fpm for this test
//! binary (started on first use with its own configuration in a temporary directory, two
//! pools: loopback TCP and a Unix socket, two children each, and a third for the test that
//! holds every child; stopped by its PID when the test process exits),
//! PHP fixtures for the parameters, cookies, errors, uploads, redirects, a slow page and error
//! output (stderr.rs: FCGI_STDERR into the log of the real binary); params.rs: the operator's
//! own parameters.

mod common;
#[path = "fastcgi/params.rs"]
mod params;
#[path = "fastcgi/stderr.rs"]
mod stderr;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use common::*;
use http_body_util::BodyExt;
use shellac::config::BackendProtocol;

/// The running php-fpm: its document root, TCP address and socket, and the TCP address of a
/// pool of its own for the test that holds every child.
struct Fpm {
    root: PathBuf,
    tcp: SocketAddr,
    socket: PathBuf,
    hold: SocketAddr,
}

static FPM: OnceLock<Option<Fpm>> = OnceLock::new();
static CHILD: Mutex<Option<Child>> = Mutex::new(None);

/// Children per pool: the tests send more requests at once than this.
const CHILDREN: usize = 2;

const FIXTURES: &[(&str, &str)] = &[
    (
        "server.php",
        "<?php header('Content-Type: application/json'); echo json_encode($_SERVER);",
    ),
    (
        "cookies.php",
        "<?php setcookie('a', '1'); setcookie('b', '2'); header('Expires: Thu, 01 Jan 1970 00:00:00 GMT'); echo 'cookies';",
    ),
    (
        "fatal.php",
        "<?php error_log('fixture about to fail'); undefined_function_called();",
    ),
    (
        "upload.php",
        "<?php echo json_encode(['size' => $_FILES['f']['size'] ?? -1, 'error' => $_FILES['f']['error'] ?? -1, 'name' => $_POST['name'] ?? null]);",
    ),
    (
        "slow.php",
        "<?php usleep(200000); echo 'slow ' . $_GET['n'];",
    ),
    ("redirect.php", "<?php header('Location: /elsewhere'); "),
    (
        "teapot.php",
        "<?php http_response_code(418); echo 'short and stout';",
    ),
    (
        "index.php",
        "<?php echo 'front ' . $_SERVER['REQUEST_URI'];",
    ),
    ("uploads/evil.jpg", "<?php echo 'EVIL';"),
    ("blog/index.php", "<?php echo 'blog index';"),
    ("info.php", "<?php phpinfo();"),
    // `n` messages of ~530 bytes to the web server's error stream (FCGI_STDERR).
    (
        "stderr.php",
        "<?php $n = (int) $_GET['n']; for ($i = 0; $i < $n; $i++) { error_log('stderr-fixture ' . $i . ' ' . str_repeat('e', 500)); } echo 'logged ' . $n;",
    ),
    ("style.css", "body { color: #333 }"),
    (
        "expired.php",
        "<?php header('Expires: Thu, 01 Jan 1970 00:00:00 GMT'); echo uniqid('', true);",
    ),
    // Writes a first part, then the rest once the file named by `f` exists (bounded).
    (
        "stream.php",
        "<?php header('Cache-Control: no-store'); echo 'first;'; flush(); for ($i = 0; $i < 600 && !file_exists($_GET['f']); $i++) { usleep(50000); } echo file_exists($_GET['f']) ? 'second' : 'gave up';",
    ),
    // Says it started (the file `s`), then holds its child until the file `f` exists.
    (
        "hold.php",
        "<?php touch($_GET['s']); for ($i = 0; $i < 600 && !file_exists($_GET['f']); $i++) { usleep(50000); } echo 'held';",
    ),
];

extern "C" fn stop_fpm() {
    if let Ok(mut child) = CHILD.lock()
        && let Some(c) = child.as_mut()
    {
        // SAFETY: kill with the PID of the child this process started.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let _ = c.wait();
    }
    let _ = std::fs::remove_dir_all(dir());
}

/// php-fpm's configuration, sockets and fixtures.
fn dir() -> PathBuf {
    std::env::temp_dir().join(format!("shellac-fpm-{}", std::process::id()))
}

fn php_fpm() -> Option<PathBuf> {
    tools::which("php-fpm8.2").or_else(|| {
        let p = PathBuf::from("/usr/sbin/php-fpm8.2");
        p.is_file().then_some(p)
    })
}

/// The shared php-fpm, started on first use; None (skipped) without php-fpm8.2.
fn fpm() -> Option<&'static Fpm> {
    FPM.get_or_init(|| {
        let bin = tools::require(php_fpm(), "php-fpm8.2", "php8.2-fpm")?;
        let dir = dir();
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("www");
        for (name, text) in FIXTURES {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
        };
        let (tcp, hold) = (free(), free());
        let socket = dir.join("fpm.sock");
        let pool = |name: &str, listen: &str| {
            format!(
                "[{name}]\nlisten = {listen}\npm = static\npm.max_children = {CHILDREN}\ncatch_workers_output = yes\nphp_admin_flag[display_errors] = off\nphp_admin_flag[log_errors] = on\nphp_admin_value[upload_max_filesize] = 16M\nphp_admin_value[post_max_size] = 16M\nphp_admin_value[memory_limit] = 64M\n"
            )
        };
        let conf = format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n\n{}\n{}\n{}",
            pool("tcp", &tcp.to_string()),
            pool("unix", &socket.display().to_string()),
            pool("hold", &hold.to_string()),
            d = dir.display()
        );
        let conf_path = dir.join("fpm.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(["-n", "-F", "-y", conf_path.to_str().unwrap()]);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("-R");
        }
        let child = cmd.spawn().expect("php-fpm starts");
        *CHILD.lock().unwrap() = Some(child);
        // SAFETY: registers a plain function run at process exit.
        unsafe { libc::atexit(stop_fpm) };
        for _ in 0..200 {
            if std::net::TcpStream::connect(tcp).is_ok()
                && std::net::TcpStream::connect(hold).is_ok()
                && socket.exists()
            {
                return Some(Fpm {
                    root: std::fs::canonicalize(&root).unwrap(),
                    tcp,
                    socket,
                    hold,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "php-fpm did not listen: {}",
            std::fs::read_to_string(dir.join("fpm.log")).unwrap_or_default()
        );
    })
    .as_ref()
}

/// Shellac in front of the shared php-fpm, over TCP or its Unix socket.
async fn shellac(fpm: &Fpm, unix: bool) -> Shellac {
    shellac_with(fpm, unix, |_| {}).await
}

async fn shellac_with(
    fpm: &Fpm,
    unix: bool,
    tweak: impl FnOnce(&mut shellac::config::Config),
) -> Shellac {
    Shellac::start(fpm.tcp, |c| {
        c.server.max_body_size = shellac::config::units::Size(32 << 20);
        let b = &mut c.backends[0];
        b.protocol = BackendProtocol::Fastcgi;
        b.root = Some(fpm.root.clone());
        b.max_connections = CHILDREN;
        if unix {
            b.host = String::new();
            b.address = Some(format!("unix:{}", fpm.socket.display()));
        }
        tweak(c);
    })
    .await
}

fn json(r: &Resp) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_sees_every_cgi_parameter() {
    let Some(fpm) = fpm() else { return };
    // The script's lookup kept for the whole test, whatever the machine's load.
    let sh = shellac_with(fpm, false, |c| {
        c.backends[0].open_file_cache_valid =
            shellac::config::units::Dur(Duration::from_secs(3600));
    })
    .await;
    let r = get_with(
        sh.addr,
        "/server.php/extra/path?x=1&y=%20",
        &[
            ("cookie", "a=1"),
            ("proxy", "http://evil.example:8080"),
            ("x-custom", "yes"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = json(&r);
    let root = fpm.root.display().to_string();
    for (k, want) in [
        ("SCRIPT_FILENAME", format!("{root}/server.php")),
        ("SCRIPT_NAME", "/server.php".into()),
        ("PATH_INFO", "/extra/path".into()),
        ("QUERY_STRING", "x=1&y=%20".into()),
        ("REQUEST_METHOD", "GET".into()),
        ("REQUEST_URI", "/server.php/extra/path?x=1&y=%20".into()),
        ("DOCUMENT_ROOT", root.clone()),
        ("SERVER_NAME", "test.example".into()),
        ("SERVER_PORT", "80".into()),
        ("SERVER_PROTOCOL", "HTTP/1.1".into()),
        ("REMOTE_ADDR", "127.0.0.1".into()),
        ("HTTP_HOST", "test.example".into()),
        ("HTTP_COOKIE", "a=1".into()),
        ("HTTP_X_CUSTOM", "yes".into()),
        ("GATEWAY_INTERFACE", "CGI/1.1".into()),
    ] {
        assert_eq!(v[k], want.as_str(), "{k}: {v}");
    }
    assert!(
        v["REMOTE_PORT"]
            .as_str()
            .is_some_and(|p| p.parse::<u16>().is_ok()),
        "{v}"
    );
    assert!(v.get("HTTP_PROXY").is_none(), "httpoxy: {v}");
    assert!(v.get("HTTPS").is_none(), "{v}");
    let body = b"a=1&b=2";
    let r = request(
        sh.addr,
        "POST",
        "/server.php",
        &[("content-type", "application/x-www-form-urlencoded")],
        body,
    )
    .await;
    let v = json(&r);
    assert_eq!(v["REQUEST_METHOD"], "POST");
    assert_eq!(v["CONTENT_TYPE"], "application/x-www-form-urlencoded");
    assert_eq!(v["CONTENT_LENGTH"], "7");
    // Kept connections were used again.
    for _ in 0..3 {
        get(sh.addr, "/server.php").await;
    }
    let b: serde_json::Value =
        serde_json::from_slice(&get(sh.admin, "/backends").await.body).unwrap();
    assert!(b["backends"][0]["reuse"].as_u64().unwrap() >= 1, "{b}");
    // The script was looked up on disk once; the other requests found it kept (bench/ab2009.sh
    // phpinfo: every request's lookup went to the blocking pool).
    assert_eq!(b["backends"][0]["files_cache_miss"], 1, "{b}");
    assert!(
        b["backends"][0]["files_cache_hit"].as_u64().unwrap() >= 4,
        "{b}"
    );
    assert_eq!(b["backends"][0]["files_cache_entries"], 1, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_over_a_unix_socket() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, true).await;
    let r = get(sh.addr, "/server.php").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(json(&r)["SCRIPT_NAME"], "/server.php");
    let r = get(sh.addr, "/blog/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "blog index"));
}

/// A page setting cookies with an Expires in the past is not cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_and_a_past_expires_are_not_cached() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    for _ in 0..2 {
        let r = get(sh.addr, "/cookies.php").await;
        assert_eq!((r.status, r.text().as_str()), (200, "cookies"));
        let cookies: Vec<&str> = r
            .headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_location_and_a_fatal_error() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let r = get(sh.addr, "/redirect.php").await;
    assert_eq!((r.status, r.header("location")), (302, Some("/elsewhere")));
    let r = get(sh.addr, "/teapot.php").await;
    assert_eq!((r.status, r.text().as_str()), (418, "short and stout"));
    let r = get(sh.addr, "/info.php").await;
    assert_eq!(r.status, 200, "{:?} {}", r.headers, r.text());
    assert!(r.text().contains("PHP Version"), "phpinfo()");
    assert!(r.text().contains("FPM/FastCGI"), "phpinfo() names the SAPI");
    let r = get(sh.addr, "/fatal.php").await;
    assert_eq!(r.status, 500, "{}", r.text());
    // The pool is fine afterwards.
    assert_eq!(get(sh.addr, "/server.php").await.status, 200);
}

/// Never hand PHP a script that does not exist: `evil.jpg` is not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_does_not_exist_is_404_never_run() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    for path in [
        "/uploads/evil.jpg/x.php",
        "/uploads/evil.jpg/.php",
        "/nope.php",
        "/a/../../x.php",
    ] {
        let r = get(sh.addr, path).await;
        assert!(r.status == 404 || r.status == 400, "{path}: {}", r.status);
        assert!(!r.text().contains("EVIL"), "{path} ran the upload");
    }
    // Other paths go to the front controller; directories to their index.
    let r = get(sh.addr, "/some/pretty/url?q=1").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "front /some/pretty/url?q=1")
    );
    let r = get(sh.addr, "/blog").await;
    assert_eq!((r.status, r.header("location")), (301, Some("/blog/")));
}

/// A multipart upload of 10 MB reaches PHP whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_megabyte_upload() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let size = 10 << 20;
    let mut body = Vec::with_capacity(size + 512);
    let b = "shellacboundary";
    body.extend_from_slice(
        format!("--{b}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nphoto\r\n--{b}\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
    );
    body.extend(std::iter::repeat_n(b'x', size));
    body.extend_from_slice(format!("\r\n--{b}--\r\n").as_bytes());
    let ct = format!("multipart/form-data; boundary={b}");
    let r = request(
        sh.addr,
        "POST",
        "/upload.php",
        &[("content-type", &ct)],
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = json(&r);
    assert_eq!(v["size"], size, "{v}");
    assert_eq!(v["error"], 0, "{v}");
    assert_eq!(v["name"], "photo", "{v}");
}

/// More requests at once than the pool has children: every one is answered (the others
/// wait in Shellac's queue; no kept connection starves them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_concurrent_requests_than_children_are_all_answered() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let n = CHILDREN * 6;
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let addr = sh.addr;
            tokio::spawn(async move { get(addr, &format!("/slow.php?n={i}")).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let r = tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .expect("answered")
            .unwrap();
        assert_eq!((r.status, r.text()), (200, format!("slow {i}")));
    }
}

/// Behind a load balancer in `trusted_proxies`, REMOTE_ADDR is the client it forwarded for,
/// not the balancer; from anyone else `X-Forwarded-For` is not believed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_addr_honours_trusted_proxies() {
    let Some(fpm) = fpm() else { return };
    let trusted = shellac_with(fpm, false, |c| {
        c.server.trusted_proxies =
            vec![shellac::config::invalidation::Network::parse("127.0.0.0/8").unwrap()];
    })
    .await;
    let xff = [("x-forwarded-for", "198.51.100.9, 203.0.113.7")];
    let v = json(&get_with(trusted.addr, "/server.php", &xff).await);
    assert_eq!(v["REMOTE_ADDR"], "203.0.113.7", "{v}");
    let untrusted = shellac(fpm, false).await;
    let v = json(&get_with(untrusted.addr, "/server.php", &xff).await);
    assert_eq!(v["REMOTE_ADDR"], "127.0.0.1", "{v}");
}

/// A response is passed on as the application writes it: the first part reaches the client
/// while the script still waits (for a file this test creates only once it has read it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_response_body_streams_as_php_writes_it() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let dir = TempDir::new("fcgi-stream");
    let go = dir.path("go");
    let mut conn = Conn::open(sh.addr).await;
    let resp = conn
        .send_head("GET", &format!("/stream.php?f={}", go.display()), &[], b"")
        .await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut seen = Vec::new();
    while !seen.ends_with(b"first;") {
        let frame = tokio::time::timeout(Duration::from_secs(20), body.frame())
            .await
            .expect("the first part before the script ends")
            .expect("a frame")
            .expect("a good frame");
        if let Ok(data) = frame.into_data() {
            seen.extend_from_slice(&data);
        }
    }
    std::fs::write(&go, "").unwrap();
    let rest = body.collect().await.unwrap().to_bytes();
    seen.extend_from_slice(&rest);
    assert_eq!(String::from_utf8_lossy(&seen), "first;second");
}

/// An Expires in the past keeps a page out of the cache, unless a rule says otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_past_expires_is_cached_only_when_a_rule_says_so() {
    let Some(fpm) = fpm() else { return };
    let plain = shellac(fpm, false).await;
    let a = get(plain.addr, "/expired.php").await;
    let b = get(plain.addr, "/expired.php").await;
    assert_eq!((a.status, b.status), (200, 200));
    assert_ne!(a.text(), b.text(), "run twice");
    let rules = shellac::config::Config::parse(
        "[[backend]]\nhost = \"127.0.0.1\"\n[[rule]]\npath = '^/expired\\.php$'\nttl = \"1m\"\noverride_origin = true\n",
        "t.toml",
    )
    .unwrap()
    .rules;
    let ruled = shellac_with(fpm, false, |c| c.rules = rules).await;
    let a = get(ruled.addr, "/expired.php").await;
    let b = get(ruled.addr, "/expired.php").await;
    assert_eq!(
        a.text(),
        b.text(),
        "stored by the rule: {:?} {:?}",
        a.headers,
        b.headers
    );
    assert!(b.cache_status().contains("hit"), "{}", b.cache_status());
}

/// Behind a load balancer speaking the PROXY protocol, REMOTE_ADDR is the client the header
/// names; over TLS the script sees HTTPS=on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_addr_from_the_proxy_protocol_and_https_over_tls() {
    use common::tls::{Pki, all_versions, tls_table};
    use tokio::io::AsyncWriteExt;
    let Some(fpm) = fpm() else { return };
    let pki = Pki::new("fcgi");
    let cert = pki.leaf("site", &["site.test"]);
    let table = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], "")
    );
    let tls = shellac::config::Config::parse(&table, "t.toml")
        .unwrap()
        .tls;
    let sh = shellac_with(fpm, false, |c| {
        c.server.proxy_protocol = shellac::config::proxy_protocol::ProxyProtocol::All;
        c.server.proxy_protocol_from =
            vec![shellac::config::invalidation::Network::parse("127.0.0.0/8").unwrap()];
        c.tls = tls;
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(sh.addr).await.unwrap();
    tcp.write_all(b"PROXY TCP4 203.0.113.5 127.0.0.1 5555 80\r\n")
        .await
        .unwrap();
    let mut conn = Conn::over(tcp).await;
    let v = json(&conn.send("GET", "/server.php", &[], b"").await);
    assert_eq!(v["REMOTE_ADDR"], "203.0.113.5", "{v}");
    assert_eq!(v["REMOTE_PORT"], "5555", "{v}");
    assert!(v.get("HTTPS").is_none(), "{v}");

    let mut tcp = tokio::net::TcpStream::connect(sh.tls_addrs()[0])
        .await
        .unwrap();
    tcp.write_all(b"PROXY TCP4 198.51.100.7 127.0.0.1 4444 443\r\n")
        .await
        .unwrap();
    let client = std::sync::Arc::new(pki.client_config(&all_versions()));
    let name = rustls::pki_types::ServerName::try_from("site.test").unwrap();
    let tls_conn = rustls::ClientConnection::new(client, name).unwrap();
    let mut stream = shellac::tls::stream::TlsStream::from_parts(tcp, tls_conn);
    stream.handshake().await.expect("TLS after the header");
    let mut conn = Conn::over(stream).await;
    let r = conn
        .send("GET", "/server.php", &[("host", "site.test")], b"")
        .await;
    let v = json(&r);
    assert_eq!(v["HTTPS"], "on", "{v}");
    assert_eq!(v["REQUEST_SCHEME"], "https", "{v}");
    assert_eq!(v["REMOTE_ADDR"], "198.51.100.7", "{v}");
    assert_eq!(v["SERVER_NAME"], "site.test", "{v}");
}

/// `max_connections` is the pool's number of children: with every child busy a request waits
/// in the queue (`max_queue`) at most `connect_timeout`, then gets 503; with no queue it gets
/// 503 at once. The held requests are answered when they are let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_queues_for_a_bounded_time_then_answers_503() {
    let Some(fpm) = fpm() else { return };
    for (max_queue, timeout) in [
        (0, Duration::from_secs(30)),
        (4, Duration::from_millis(300)),
    ] {
        let sh = shellac_with(fpm, false, |c| {
            let b = &mut c.backends[0];
            b.port = fpm.hold.port();
            b.max_queue = max_queue;
            b.connect_timeout = shellac::config::units::Dur(timeout);
        })
        .await;
        let dir = TempDir::new(&format!("fcgi-hold-{max_queue}"));
        let go = dir.path("go");
        let held: Vec<_> = (0..CHILDREN)
            .map(|i| {
                let (addr, path) = (
                    sh.addr,
                    format!(
                        "/hold.php?s={}&f={}&n={i}",
                        dir.path(&format!("started{i}")).display(),
                        go.display()
                    ),
                );
                tokio::spawn(async move { get(addr, &path).await })
            })
            .collect();
        let started = eventually(Duration::from_secs(20), || async {
            (0..CHILDREN).all(|i| dir.path(&format!("started{i}")).exists())
        })
        .await;
        assert!(started, "both children run a held request");
        let r = get(sh.addr, "/server.php").await;
        assert_eq!(r.status, 503, "queue {max_queue}: {}", r.text());
        assert_eq!(sh.stat("backend_busy").await, 1);
        std::fs::write(&go, "").unwrap();
        for h in held {
            let r = tokio::time::timeout(Duration::from_secs(30), h)
                .await
                .expect("answered")
                .unwrap();
            assert_eq!((r.status, r.text().as_str()), (200, "held"));
        }
        // The children are free again.
        assert_eq!(get(sh.addr, "/server.php").await.status, 200);
        sh.stop().await;
    }
}

/// Kept connections are closed once unused for `idle_timeout`, though no request comes to
/// notice it: an idle connection holds a PHP-FPM child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_released_without_another_request() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac_with(fpm, false, |c| {
        c.backends[0].idle_timeout = shellac::config::units::Dur(Duration::from_secs(2));
    })
    .await;
    assert_eq!(get(sh.addr, "/server.php").await.status, 200);
    let idle = || async {
        let b: serde_json::Value =
            serde_json::from_slice(&get(sh.admin, "/backends").await.body).unwrap();
        b["backends"][0]["idle"].as_u64()
    };
    assert_eq!(idle().await, Some(1), "the connection is kept");
    assert!(
        eventually(Duration::from_secs(20), || async {
            idle().await == Some(0)
        })
        .await,
        "the kept connection is closed"
    );
    // The next request opens a new one.
    assert_eq!(get(sh.addr, "/server.php").await.status, 200);
    assert_eq!(sh.stat("backend_conn").await, 2);
}

/// `[[site]] root`: two sites share one PHP-FPM pool, each running scripts from its own
/// document root (SCRIPT_FILENAME, DOCUMENT_ROOT); a script only the other root has is 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_runs_scripts_from_its_own_root() {
    let Some(fpm) = fpm() else { return };
    let dir = TempDir::new("fcgi-site-root");
    let other = dir.path("other");
    std::fs::create_dir_all(other.join("uploads")).unwrap();
    std::fs::write(other.join("server.php"), FIXTURES[0].1).unwrap();
    std::fs::write(other.join("uploads/evil.jpg"), "<?php echo 'EVIL';").unwrap();
    let other = std::fs::canonicalize(other).unwrap();
    let sh = shellac_with(fpm, false, |c| {
        c.sites = vec![
            shellac::config::site::SiteConfig {
                name: "other".into(),
                server_name: vec!["other.test".into()],
                root: Some(other.clone()),
                cache: true,
                ..Default::default()
            },
            shellac::config::site::SiteConfig {
                name: "main".into(),
                default: true,
                cache: true,
                ..Default::default()
            },
        ];
    })
    .await;
    let v = json(&get_with(sh.addr, "/server.php", &[("host", "other.test")]).await);
    let root = other.display().to_string();
    assert_eq!(v["SCRIPT_FILENAME"], format!("{root}/server.php"), "{v}");
    assert_eq!(v["DOCUMENT_ROOT"], root, "{v}");
    let v = json(&get_with(sh.addr, "/server.php", &[("host", "main.test")]).await);
    let main = fpm.root.display().to_string();
    assert_eq!(v["SCRIPT_FILENAME"], format!("{main}/server.php"), "{v}");
    for path in ["/info.php", "/uploads/evil.jpg/x.php", "/pretty/url"] {
        let r = get_with(sh.addr, path, &[("host", "other.test")]).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert!(!r.text().contains("EVIL"), "{path}");
    }
}

/// A FastCGI record by hand: version 1, `kind`, request id 1, no padding.
fn record(kind: u8, content: &[u8]) -> Vec<u8> {
    let len = (content.len() as u16).to_be_bytes();
    let mut r = vec![1, kind, 0, 1, len[0], len[1], 0, 0];
    r.extend_from_slice(content);
    r
}

/// FCGI_END_REQUEST with `protocol_status`.
fn end_request(protocol_status: u8) -> Vec<u8> {
    record(3, &[0, 0, 0, 0, protocol_status, 0, 0, 0])
}

/// A FastCGI responder that answers the n-th complete request (up to its empty STDIN
/// record) with `answers[n]`, then closes the connection; after the last answer it stops
/// listening.
async fn scripted_responder(answers: Vec<Vec<u8>>) -> SocketAddr {
    scripted_responder_on("127.0.0.1:0".parse().unwrap(), answers).await
}

/// [`scripted_responder`] listening on `addr`. A connection closed before its request is
/// complete (a health probe's) is not answered.
async fn scripted_responder_on(addr: SocketAddr, answers: Vec<Vec<u8>>) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut answers = answers.into_iter().peekable();
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Read records until the empty STDIN (the end of the request).
            let complete = loop {
                let mut at = 0;
                let mut done = false;
                while buf.len() >= at + 8 {
                    let len = u16::from_be_bytes([buf[at + 4], buf[at + 5]]) as usize;
                    let pad = buf[at + 6] as usize;
                    if buf[at + 1] == 5 && len == 0 {
                        done = true;
                    }
                    at += 8 + len + pad;
                }
                if done {
                    break true;
                }
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => break false,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            if !complete {
                continue;
            }
            let Some(answer) = answers.next() else { return };
            let _ = s.write_all(&answer).await;
            let _ = s.shutdown().await;
            if answers.peek().is_none() {
                return; // stops listening
            }
        }
    });
    addr
}

/// An application that refuses a request (FCGI_END_REQUEST: overloaded, cannot multiplex,
/// unknown role), ends it without a head, or sends broken records: the client gets 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_request_errors_and_broken_records_are_502() {
    let dir = TempDir::new("fcgi-refused");
    std::fs::write(dir.path("x.php"), "").unwrap();
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let good = [
        record(
            6,
            b"Status: 201 Created\r\nContent-Type: text/plain\r\n\r\nmade",
        ),
        record(6, b""),
        end_request(0),
    ]
    .concat();
    let answers = vec![
        end_request(2),
        end_request(1),
        end_request(3),
        [record(6, b""), end_request(0)].concat(),
        [vec![9], record(6, b"Status: 200\r\n\r\nx")[1..].to_vec()].concat(),
        good,
    ];
    let n = answers.len();
    let app = scripted_responder(answers).await;
    let sh = Shellac::start(app, |c| {
        let b = &mut c.backends[0];
        b.protocol = BackendProtocol::Fastcgi;
        b.root = Some(root);
        b.max_connections = 2;
    })
    .await;
    for i in 0..n - 1 {
        let r = get(sh.addr, &format!("/x.php?case={i}")).await;
        assert_eq!(r.status, 502, "case {i}: {}", r.text());
    }
    let r = get(sh.addr, "/x.php?case=good").await;
    assert_eq!((r.status, r.text().as_str()), (201, "made"));
}

/// Issue 31, "timeouts and probes as for HTTP origins" (docs/fastcgi.md): an application that
/// reads the request and never answers gets the client a 504 at `first_byte_timeout` (counter
/// `backend_timeout`), as an HTTP origin does; a probed FastCGI backend (a connection opened,
/// no script run) whose address stops accepting is marked sick and takes no requests, and is
/// healthy again once something accepts there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fastcgi_origin_has_the_timeouts_and_probes_of_an_http_origin() {
    use shellac::config::units::Dur;
    use shellac::config::{ProbeConfig, ProbeRef};
    use tokio::io::AsyncReadExt;
    let dir = TempDir::new("fcgi-timeouts");
    std::fs::write(dir.path("x.php"), "").unwrap();
    let root = std::fs::canonicalize(&dir.0).unwrap();

    // Reads every request and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = silent.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    let sh = Shellac::start(silent_addr, |c| {
        let b = &mut c.backends[0];
        b.protocol = BackendProtocol::Fastcgi;
        b.root = Some(root.clone());
        b.max_connections = 2;
        b.first_byte_timeout = Dur(Duration::from_millis(300));
    })
    .await;
    let r = get(sh.addr, "/x.php").await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(
        r.text().contains("backend-first-byte-timeout"),
        "{}",
        r.text()
    );
    assert_eq!(sh.stat("backend_timeout").await, 1);
    sh.stop().await;

    let good = [
        record(6, b"Content-Type: text/plain\r\n\r\nup"),
        record(6, b""),
        end_request(0),
    ]
    .concat();
    let app = scripted_responder(vec![good.clone()]).await;
    let sh = Shellac::start(app, |c| {
        let b = &mut c.backends[0];
        b.protocol = BackendProtocol::Fastcgi;
        b.root = Some(root.clone());
        b.max_connections = 2;
        b.probe = Some(ProbeRef::Inline(ProbeConfig {
            name: String::new(),
            url: None,
            request: None,
            expected_status: 200,
            interval: Dur(Duration::from_millis(50)),
            timeout: Dur(Duration::from_millis(500)),
            window: 3,
            threshold: 2,
            initial: Some(3),
        }));
    })
    .await;
    let health = || async {
        let v: serde_json::Value =
            serde_json::from_slice(&get(sh.admin, "/backends").await.body).expect("JSON");
        v["backends"][0]["healthy"].as_bool()
    };
    assert_eq!(health().await, Some(true));
    // The responder ends after its one answer: nothing accepts at its address any more.
    let r = get(sh.addr, "/x.php?first").await;
    assert_eq!((r.status, r.text().as_str()), (200, "up"));
    assert!(
        eventually(Duration::from_secs(10), || async {
            health().await == Some(false)
        })
        .await,
        "a FastCGI backend that accepts no connection is marked sick"
    );
    let r = get(sh.addr, "/x.php?sick").await;
    assert_eq!(r.status, 503, "{}", r.text());
    scripted_responder_on(app, vec![good]).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            health().await == Some(true)
        })
        .await,
        "healthy again once it accepts"
    );
    let r = get(sh.addr, "/x.php?again").await;
    assert_eq!((r.status, r.text().as_str()), (200, "up"));
    sh.stop().await;
}

/// examples/wordpress-fpm.toml against the fixtures: static files from disk, `.php` run (never
/// sent as text), pretty permalinks through the front controller and cached, logged-in users
/// passed, a script that is not there 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wordpress_on_php_fpm_example_works() {
    let Some(fpm) = fpm() else { return };
    let sh = Shellac::start_file("examples/wordpress-fpm.toml", fpm.tcp, |c| {
        for b in &mut c.backends {
            b.root = Some(fpm.root.clone());
        }
        let php = &mut c.backends[0];
        php.address = None;
        php.max_connections = CHILDREN;
    })
    .await;
    let r = get(sh.addr, "/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "front /"));
    let r = get(sh.addr, "/2026/11/hello-world/").await;
    assert_eq!(r.text(), "front /2026/11/hello-world/");
    let r = get(sh.addr, "/2026/11/hello-world/").await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    let cookie = [("cookie", "wordpress_logged_in_abc=1")];
    let r = get_with(sh.addr, "/2026/11/hello-world/", &cookie).await;
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    let r = get(sh.addr, "/info.php").await;
    assert!(r.text().contains("PHP Version"), "run, not sent");
    assert!(!r.text().contains("<?php"));
    let r = get(sh.addr, "/style.css").await;
    assert_eq!(
        (r.status, r.header("content-type"), r.text().as_str()),
        (200, Some("text/css"), "body { color: #333 }")
    );
    let r = get(sh.addr, "/uploads/evil.jpg/x.php").await;
    assert_eq!(r.status, 404);
    assert_eq!(get(sh.addr, "/blog").await.status, 301);
    assert_eq!(get(sh.addr, "/blog/").await.text(), "blog index");
}
