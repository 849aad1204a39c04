//! Issue 32: `shellac check --online` connects to every backend, the Redis cluster (with the
//! file's credentials) and every ACME directory, and reports what it could not reach or was
//! refused by — against real loopback servers: a closed port, a `redis-server` with another
//! password, pebble.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::TempDir;
use common::binary::BIN;
use common::pebble::Pebble;

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A standalone `redis-server` with `requirepass`, stopped when dropped.
struct Redis(Child, u16);

impl Redis {
    fn start(password: &str) -> Option<Redis> {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--requirepass", password])
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .stdout(Stdio::null())
            .spawn()
            .ok()?;
        let redis = Redis(child, port);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(redis);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not listen");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

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
    let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = open.local_addr().unwrap().port();
    let closed = free_port();
    let mut text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"off\"\n\n\
         [[backend]]\nname = \"up\"\nhost = \"127.0.0.1\"\nport = {open_port}\n\n\
         [[backend]]\nname = \"down\"\nhost = \"127.0.0.1\"\nport = {closed}\n\n\
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
        stdout.contains(&format!("online: backend `up` (127.0.0.1:{open_port}): OK")),
        "{stdout}{stderr}"
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
    drop(open);
}
