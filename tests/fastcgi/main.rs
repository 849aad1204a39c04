//! `[[backend]] protocol = "fastcgi"` against Debian's php8.2-fpm: one php-fpm for this test
//! binary (started on first use with its own configuration in a temporary directory, two
//! pools: loopback TCP and a Unix socket, two children each, and a third for the test that
//! holds every child; stopped by its PID when the test process exits),
//! PHP fixtures for the parameters, cookies, errors, uploads, redirects, a slow page and error
//! output (`stderr`: FCGI_STDERR into the log of the real binary); `params`: the operator's
//! own parameters. The php-fpm and the helpers are here; the tests in `requests`, `responses`,
//! `pool`, `records` (a scripted responder, no php-fpm), `params` and `stderr` (test names
//! `MODULE::NAME`).

#[path = "../common/mod.rs"]
mod common;
mod params;
mod pool;
mod records;
mod requests;
mod responses;
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
        let socket = dir.join("fpm.sock");
        let pool = |name: &str, listen: &str| {
            format!(
                "[{name}]\nlisten = {listen}\npm = static\npm.max_children = {CHILDREN}\ncatch_workers_output = yes\nphp_admin_flag[display_errors] = off\nphp_admin_flag[log_errors] = on\nphp_admin_value[upload_max_filesize] = 16M\nphp_admin_value[post_max_size] = 16M\nphp_admin_value[memory_limit] = 64M\n"
            )
        };
        // The TCP ports are free when chosen (bound and released), but another test's
        // connection can take one as its local port before php-fpm binds it ("Address already
        // in use", php-fpm exits; seen once in 9 runs under load): then new ports, a new try.
        // SAFETY: registers a plain function run at process exit (it stops the child of the
        // last try).
        unsafe { libc::atexit(stop_fpm) };
        for _ in 0..5 {
            let (tcp, hold) = (free(), free());
            let conf = format!(
                "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n\n{}\n{}\n{}",
                pool("tcp", &tcp.to_string()),
                pool("unix", &socket.display().to_string()),
                pool("hold", &hold.to_string()),
                d = dir.display()
            );
            let conf_path = dir.join("fpm.conf");
            std::fs::write(&conf_path, conf).unwrap();
            let _ = std::fs::remove_file(&socket);
            let mut cmd = Command::new(&bin);
            cmd.args(["-n", "-F", "-y", conf_path.to_str().unwrap()]);
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                cmd.arg("-R");
            }
            let child = cmd.spawn().expect("php-fpm starts");
            *CHILD.lock().unwrap() = Some(child);
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
                let exited = CHILD
                    .lock()
                    .unwrap()
                    .as_mut()
                    .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
                if exited {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let log = std::fs::read_to_string(dir.join("fpm.log")).unwrap_or_default();
            if !log.contains("Address already in use") {
                panic!("php-fpm did not listen: {log}");
            }
            if let Some(mut c) = CHILD.lock().unwrap().take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = std::fs::remove_file(dir.join("fpm.log"));
        }
        panic!("php-fpm found no free port in 5 tries");
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
