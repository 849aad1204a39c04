//! Start-up as an operator meets it: the settings that shape start-up and shutdown (admin
//! listener off, listen backlog, shutdown grace, an unusable disk tier, memory only) do what
//! they say. Its modules: `check` (`shellac check` refuses every file `shellac serve` would
//! refuse to start with), signals during start-up, the systemd notification protocol
//! (`service_notify`), socket activation and `shellac upgrade` (each but `signals` and `check`
//! was a test binary of its own; test names are `MODULE::NAME`).

mod check;
#[path = "../common/mod.rs"]
mod common;
mod service_notify;
mod signals;
mod socket_activation;
mod upgrade;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::binary::{BIN, run as shellac};
use common::*;

/// `shellac serve --config FILE` with its log (stderr) read line by line; killed on drop.
struct Serving {
    child: Child,
    log: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Serving {
    fn start(config: &Path) -> Serving {
        let mut child = Command::new(BIN)
            .args(["serve", "--config", config.to_str().unwrap()])
            .env("SHELLAC_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start shellac");
        let stderr = child.stderr.take().expect("piped");
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Serving {
            child,
            log,
            seen: Vec::new(),
        }
    }

    /// The first log line containing `text` (at most 20 s), remembering every line read.
    fn wait_for(&mut self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.log.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no log line with {text:?}; log:\n{}", self.seen.join("\n"));
    }

    /// Waits (at most 20 s) for the process to exit: its exit code and its whole log.
    fn exit(mut self) -> (Option<i32>, String) {
        for _ in 0..400 {
            if let Ok(Some(status)) = self.child.try_wait() {
                // The reader thread ends with the pipe; collect what it still has.
                while let Ok(line) = self.log.recv_timeout(Duration::from_secs(5)) {
                    self.seen.push(line);
                }
                return (status.code(), self.seen.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("shellac did not exit; log:\n{}", self.seen.join("\n"));
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// The proxy's first listening address, from its log.
    fn proxy(&mut self) -> SocketAddr {
        let line = self.wait_for("proxy listening on ");
        line.split("proxy listening on ")
            .nth(1)
            .and_then(|a| a.trim().parse().ok())
            .expect("an address")
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("shellac.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Issue 23 #15: `admin = "off"` (or `false`) starts no admin listener, and says so.
#[test]
fn the_admin_listener_can_be_turned_off() {
    let dir = TempDir::new("admin-off");
    for off in ["\"off\"", "false"] {
        let config = write_config(
            &dir.0,
            &format!(
                "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = {off}\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = 9\n"
            ),
        );
        let (code, out, err) = shellac(&["check", config.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("admin off"), "{out}");
        let mut serving = Serving::start(&config);
        serving.proxy();
        let line = serving.wait_for("serving:");
        assert!(line.contains("; admin off"), "{line}");
        assert!(
            !serving.seen.iter().any(|l| l.contains("admin listening")),
            "{:?}",
            serving.seen
        );
        serving.signal("-TERM");
        let (code, log) = serving.exit();
        assert_eq!(code, Some(0), "{log}");
    }
}

/// Issue 23 #11: the shutdown grace is `server.shutdown_grace`, not a fixed 10 s: with 5 s,
/// after SIGTERM a request whose origin answers within the grace still gets its answer, and
/// one whose origin takes 9 s (which the old fixed 10 s would have waited for) is cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_waits_for_shutdown_grace() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = Origin::start(|seen| {
        let delay = if seen.path == "/cut" { 9 } else { 1 };
        Reply::ok("slow but complete").delay(Duration::from_secs(delay))
    })
    .await;
    let dir = TempDir::new("grace");
    let config = write_config(
        &dir.0,
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\nshutdown_grace = \"5s\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            origin.addr.port()
        ),
    );
    let mut serving = Serving::start(&config);
    let proxy = serving.proxy();
    let fetch = |path: &'static str| {
        tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(proxy).await.unwrap();
            let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut out = Vec::new();
            let _ =
                tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut out)).await;
            String::from_utf8_lossy(&out).into_owned()
        })
    };
    let (answered, cut) = (fetch("/answered"), fetch("/cut"));
    for _ in 0..400 {
        if origin.count() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(origin.count(), 2, "both requests reached the origin");
    serving.signal("-TERM");
    let line = serving.wait_for("shutting down");
    assert!(line.contains("at most 5s"), "{line}");
    let answer = answered.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("slow but complete"), "{answer}");
    let answer = cut.await.unwrap();
    assert!(!answer.ends_with("slow but complete"), "{answer}");
    let (code, log) = tokio::task::spawn_blocking(move || serving.exit())
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{log}");
}

/// A stop loses no request a client has sent or is sending: after SIGTERM a keep-alive
/// connection idle between requests is closed, but a new connection that has not sent its
/// first request yet (waiting in the parking lot) and one whose request head is half-way in
/// are answered, with `Connection: close`, and then closed. (Closed unread, as hyper's
/// graceful shutdown closes a connection it sees idle, they lost the request; under
/// `shellac upgrade` a connection accepted just before the old process stopped lost its
/// first request that way.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_answers_a_request_that_is_arriving_or_due_on_a_new_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    let origin = Origin::start(|seen| Reply::ok(&format!("answer to {}", seen.path))).await;
    let dir = TempDir::new("stop-arriving");
    let config = write_config(
        &dir.0,
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\nshutdown_grace = \"20s\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            origin.addr.port()
        ),
    );
    let mut serving = Serving::start(&config);
    let proxy = serving.proxy();
    async fn read_all(stream: &mut TcpStream) -> String {
        let mut out = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut out))
            .await
            .is_ok();
        assert!(ended, "the connection was not closed: {out:?}");
        String::from_utf8_lossy(&out).into_owned()
    }
    // Idle between requests: one request answered, the connection kept.
    let mut idle = TcpStream::connect(proxy).await.unwrap();
    idle.write_all(b"GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains("answer to /idle") {
        let n = tokio::time::timeout(Duration::from_secs(10), idle.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    // New, nothing sent yet; and new with half a head sent.
    let mut fresh = TcpStream::connect(proxy).await.unwrap();
    let mut half = TcpStream::connect(proxy).await.unwrap();
    half.write_all(b"GET /half HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    serving.signal("-TERM");
    serving.wait_for("shutting down");
    // The idle one is closed with nothing more said: the stop has reached the sessions.
    assert_eq!(read_all(&mut idle).await, "");
    tokio::time::sleep(Duration::from_millis(300)).await;
    fresh
        .write_all(b"GET /fresh HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    half.write_all(b"\r\n").await.unwrap();
    for (stream, path) in [(&mut fresh, "/fresh"), (&mut half, "/half")] {
        let answer = read_all(stream).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer:?}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{path}: {answer:?}"
        );
        assert!(answer.ends_with(&format!("answer to {path}")), "{answer:?}");
    }
    let (code, log) = tokio::task::spawn_blocking(move || serving.exit())
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{log}");
}

/// The accept-queue limit of the socket listening on `addr`: `ss`'s Send-Q of a listener.
fn listen_queue_limit(addr: SocketAddr) -> u32 {
    let out = Command::new("ss")
        .args(["-ltnH"])
        .output()
        .expect("this test reads listen queues with ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(3) == Some(addr.to_string().as_str()))
        .unwrap_or_else(|| panic!("{addr} is not listening:\n{text}"));
    line.split_whitespace()
        .nth(2)
        .and_then(|q| q.parse().ok())
        .unwrap_or_else(|| panic!("no Send-Q in {line}"))
}

/// Issue 23 #10: `server.listen_backlog` is the listen queue of every client listener (it was
/// a fixed 128: a burst of connections beyond it waited 1 s for a SYN retransmit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_backlog_reaches_the_socket() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.listen = vec![
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
        ];
        c.server.listen_backlog = 77;
    })
    .await;
    let listening = shellac.listening();
    assert_eq!(listening.len(), 2);
    for addr in listening {
        assert_eq!(listen_queue_limit(addr), 77, "{addr}");
    }
    shellac.stop().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096);
    assert_eq!(
        listen_queue_limit(shellac.addr),
        somaxconn.min(4096),
        "the default"
    );
    shellac.stop().await;
}

/// A listener a reload adds gets the backlog too; changing the backlog needs a restart (the
/// listeners already open keep theirs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_backlog_on_reload() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let dir = TempDir::new("backlog-reload");
    let text = |listen: &str, backlog: u32| {
        format!(
            "[server]\nlisten = [{listen}]\nadmin = \"127.0.0.1:0\"\nlisten_backlog = {backlog}\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            origin.addr.port()
        )
    };
    let config = write_config(&dir.0, &text("\"127.0.0.1:0\"", 33));
    let shellac = Shellac::start_reloadable(&config).await;
    assert_eq!(listen_queue_limit(shellac.addr), 33);
    // A second listener on a port known to be free now.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let added = free.local_addr().unwrap();
    drop(free);
    write_config(&dir.0, &text(&format!("\"127.0.0.1:0\", \"{added}\""), 33));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(listen_queue_limit(added), 33);
    write_config(&dir.0, &text(&format!("\"127.0.0.1:0\", \"{added}\""), 44));
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("server.listen_backlog"), "{v}");
    shellac.stop().await;
}

/// A config with a disk tier at `path`; `extra` goes into `[storage.disk]`.
fn disk_config(path: &str, extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[storage.disk]\npath = \"{path}\"\nsize = \"4MiB\"\nregion_size = \"1MiB\"\n{extra}\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = 9\n"
    )
}

/// Issue 23 #3: a disk tier that cannot be opened (missing directory, a directory nobody may
/// create files in) stops start-up by default, with the reason; it used to log an ERROR and
/// run on memory alone while the start-up line still announced the disk cache. `serve`
/// refuses before anything starts (the checks `check` runs); should the file still fail to
/// open after them, starting the proxy fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_disk_tier_refuses_to_start() {
    let dir = TempDir::new("disk-refuse");
    let missing = dir.0.join("no-such-dir/cache.dat");
    for path in [missing.to_str().unwrap(), "/sys/shellac-cache.dat"] {
        let config = write_config(&dir.0, &disk_config(path, ""));
        let (code, log) = tokio::task::spawn_blocking(move || Serving::start(&config).exit())
            .await
            .unwrap();
        assert_ne!(code, Some(0), "{log}");
        assert!(log.contains("`storage.disk.path`: cannot create"), "{log}");
        assert!(log.contains(path), "{log}");
        assert!(!log.contains("serving:"), "{log}");

        let text = disk_config(path, "");
        let config = shellac::config::Config::parse(&text, "t.toml").unwrap();
        let err = match shellac::server::start(std::sync::Arc::new(config)).await {
            Ok(_) => panic!("started without its disk tier"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            err.contains(&format!("cannot open the disk cache {path}")),
            "{err}"
        );
        assert!(err.contains("on_open_error"), "{err}");
    }
}

/// With `on_open_error = "memory-only"` it serves from memory, and the start-up line says the
/// disk tier is not running.
#[test]
fn memory_only_is_an_explicit_choice_and_the_start_up_line_says_so() {
    let dir = TempDir::new("disk-memory-only");
    let missing = dir.0.join("no-such-dir/cache.dat");
    let config = write_config(
        &dir.0,
        &disk_config(missing.to_str().unwrap(), "on_open_error = \"memory-only\""),
    );
    let mut serving = Serving::start(&config);
    serving.proxy();
    let line = serving.wait_for("serving:");
    assert!(
        line.contains(&format!("disk cache at {} NOT running", missing.display())),
        "{line}"
    );
    assert!(!line.contains("disk cache 4 MiB"), "{line}");
    assert!(
        serving
            .seen
            .iter()
            .any(|l| l.contains("ERROR") && l.contains("memory tier only")),
        "{:?}",
        serving.seen
    );
    serving.signal("-TERM");
    let (code, log) = serving.exit();
    assert_eq!(code, Some(0), "{log}");
    // A disk tier that opens is announced as before.
    let data = dir.0.join("cache.dat");
    let config = write_config(&dir.0, &disk_config(data.to_str().unwrap(), ""));
    let mut serving = Serving::start(&config);
    let line = serving.wait_for("serving:");
    assert!(
        line.contains(&format!("disk cache 4 MiB at {}", data.display())),
        "{line}"
    );
    serving.signal("-TERM");
    assert_eq!(serving.exit().0, Some(0));
}
