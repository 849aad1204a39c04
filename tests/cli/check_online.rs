//! Issue 32: `shellac check --online` connects to every backend, the Redis cluster (with the
//! file's credentials) and every ACME directory, and reports what it could not reach or was
//! refused by — against real loopback servers: a closed port, a `redis-server` with another
//! password, pebble.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::binary::BIN;
use crate::common::pebble::Pebble;
use crate::common::{TempDir, free_port, refused_port};

/// A standalone `redis-server` with `requirepass`, stopped when dropped.
struct Redis(Child, u16);

impl Redis {
    /// The port is free when chosen (bound and released), but another test's connection can
    /// take it as its local port first: redis-server then exits at once, and a new port is
    /// tried (at most 5). A server that stays up is given 10 s to listen (a loaded machine).
    fn start(password: &str) -> Option<Redis> {
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--requirepass", password])
                .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
                .stdout(Stdio::null())
                .spawn()
                .ok()?;
            let mut redis = Redis(child, port);
            for _ in 0..500 {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(redis);
                }
                if matches!(redis.0.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(redis.0.try_wait(), Ok(None)) {
                panic!("redis-server did not listen on {port} within 10 s");
            }
        }
        panic!("redis-server exited at once on 5 ports in a row");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An HTTP/1.1 origin on its own thread: `/health` answers 503, everything else 200; one
/// request per connection. Runs until the test process ends.
fn http_origin() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let status = if head.starts_with(b"GET /health ") {
                "503 Service Unavailable"
            } else {
                "200 OK"
            };
            let _ = stream.write_all(
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .as_bytes(),
            );
        }
    });
    port
}

/// Issue 32: `check --online` only opened a TCP connection to each backend; it now sends what
/// the backend's probe sends (or `HEAD /`) and reads the answer, so a backend that accepts
/// connections but answers 5xx, answers its probe wrong or never answers is reported.
#[test]
fn check_online_reports_a_closed_port_a_wrong_redis_password_and_the_acme_directory() {
    let Some(redis) = Redis::start("right-pass") else {
        assert!(
            std::env::var_os("SHELLAC_REQUIRE_TOOLS").is_none(),
            "redis-server missing"
        );
        return;
    };
    let dir = TempDir::new("check-online");
    let open_port = http_origin();
    // Accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let closed = refused_port();
    let mut text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"off\"\n\n\
         [[backend]]\nname = \"up\"\nhost = \"127.0.0.1\"\nport = {open_port}\n\n\
         [[backend]]\nname = \"down\"\nhost = \"127.0.0.1\"\nport = {closed}\n\n\
         [[backend]]\nname = \"sick\"\nhost = \"127.0.0.1\"\nport = {open_port}\n\
         probe = {{ url = \"/health\" }}\n\n\
         [[backend]]\nname = \"silent\"\nhost = \"127.0.0.1\"\nport = {silent_port}\n\
         probe = {{ url = \"/\", timeout = \"300ms\" }}\n\n\
         [storage.shared]\nnodes = [\"127.0.0.1:{}\"]\npassword = \"wrong-pass\"\n\n",
        redis.1
    );
    let pebble = Pebble::get();
    if let Some(p) = pebble {
        let state = dir.path("acme");
        text.push_str(&format!(
            "[[tls]]\nlisten = \"127.0.0.1:0\"\n{}",
            p.acme_table(&["a.shellac.test"], "tls-alpn-01", &state, "")
        ));
    }
    let file = dir.path("online.toml");
    std::fs::write(&file, &text).unwrap();
    let out = Command::new(BIN)
        .args(["check", "--online", file.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "online: backend `up` (127.0.0.1:{open_port}): OK (HEAD / answered 200)"
        )),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "`backend.2`: backend `sick` (127.0.0.1:{open_port}): GET /health answered 503; its probe expects 200"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "`backend.3`: backend `silent` (127.0.0.1:{silent_port}): no answer to GET / within 300ms"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "`backend.1`: backend `down` (127.0.0.1:{closed}): cannot connect: Connection refused"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("`storage.shared`: the Redis cluster")
            && stderr.contains("set storage.shared.password")
            && stderr.contains("WRONGPASS"),
        "{stderr}"
    );
    if let Some(p) = pebble {
        assert!(
            stdout.contains(&format!("online: the ACME directory {}: OK", p.directory)),
            "{stdout}{stderr}"
        );
        // A directory URL that is not one.
        let wrong = text.replace(&p.directory, &format!("{}-nothing", p.directory));
        std::fs::write(&file, wrong).unwrap();
        let out = Command::new(BIN)
            .args(["check", "--online", file.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("`tls.0.acme.0.directory`: the ACME directory")
                && stderr.contains("answered 404"),
            "{stderr}"
        );
    }
    drop(silent);
}
