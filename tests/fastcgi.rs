//! `[[backend]] protocol = "fastcgi"` against Debian's php8.2-fpm: one php-fpm for this test
//! binary (started on first use with its own configuration in a temporary directory, two
//! pools: loopback TCP and a Unix socket, two children each; stopped by its PID when the
//! test process exits),
//! PHP fixtures for the parameters, cookies, errors, uploads, redirects and a slow page.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use common::*;
use shellac::config::BackendProtocol;

/// The running php-fpm: its document root, TCP address and socket.
struct Fpm {
    root: PathBuf,
    tcp: SocketAddr,
    socket: PathBuf,
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
        let tcp = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let socket = dir.join("fpm.sock");
        let pool = |name: &str, listen: &str| {
            format!(
                "[{name}]\nlisten = {listen}\npm = static\npm.max_children = {CHILDREN}\ncatch_workers_output = yes\nphp_admin_flag[display_errors] = off\nphp_admin_flag[log_errors] = on\nphp_admin_value[upload_max_filesize] = 16M\nphp_admin_value[post_max_size] = 16M\nphp_admin_value[memory_limit] = 64M\n"
            )
        };
        let conf = format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n\n{}\n{}",
            pool("tcp", &tcp.to_string()),
            pool("unix", &socket.display().to_string()),
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
            if std::net::TcpStream::connect(tcp).is_ok() && socket.exists() {
                return Some(Fpm {
                    root: std::fs::canonicalize(&root).unwrap(),
                    tcp,
                    socket,
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
    let sh = shellac(fpm, false).await;
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
