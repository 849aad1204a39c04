//! The systemd notification protocol as `shellac serve` speaks it, received on a datagram
//! socket in the abstract namespace (as systemd's `$NOTIFY_SOCKET` is): READY=1 once every
//! listener is bound (the disk tier open), STATUS=, WATCHDOG=1 at half of `$WATCHDOG_USEC`,
//! RELOADING=1 with MONOTONIC_USEC= then READY=1 around a reload (refused or not), STOPPING=1.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::process::Command;
use std::time::Duration;

use crate::common::binary::{BIN, Served};
use crate::common::{Origin, Reply, get, temp_dir};

/// A notify socket: `@name` for the child, the bound socket for the test.
fn notify_socket(tag: &str) -> (String, UnixDatagram) {
    let name = format!("shellac-test-{tag}-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let sock = UnixDatagram::bind_addr(&addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    (format!("@{name}"), sock)
}

/// The next datagram holding `key` (others, e.g. STATUS= or WATCHDOG=1, are skipped); every
/// datagram seen is kept in `seen`.
fn next_with(sock: &UnixDatagram, key: &str, seen: &mut Vec<String>) -> String {
    let mut buf = vec![0u8; 4096];
    for _ in 0..200 {
        let n = sock.recv(&mut buf).expect("a notification within 20 s");
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        seen.push(msg.clone());
        if msg.lines().any(|l| l.starts_with(key)) {
            return msg;
        }
    }
    panic!("no {key} among {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_tells_systemd_ready_reloading_status_watchdog_and_stopping() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=60")).await;
    let dir = temp_dir("service-notify");
    let config = dir.join("shellac.toml");
    let write = |extra: &str| {
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[storage.disk]\npath = \"{}\"\nsize = \"64MiB\"\nregion_size = \"4MiB\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n{extra}",
                dir.join("cache.dat").display(),
                origin.addr.port()
            ),
        )
        .unwrap();
    };
    write("");
    let (name, sock) = notify_socket("notify");
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--config", config.to_str().unwrap()])
        .env("NOTIFY_SOCKET", &name)
        .env("WATCHDOG_USEC", "400000");
    let child = Served::start(cmd);
    let mut seen = Vec::new();
    let ready = next_with(&sock, "READY=1", &mut seen);
    assert!(ready.contains("STATUS=serving"), "{ready}");
    // READY=1 means serving: the listener answers at once.
    assert_eq!(get(child.proxy, "/a").await.status, 200);
    // The watchdog at half of 400 ms, without waiting for any status line.
    next_with(&sock, "WATCHDOG=1", &mut seen);

    // A reload, accepted: RELOADING=1 with the monotonic clock, then READY=1.
    child.signal("-HUP");
    let reloading = next_with(&sock, "RELOADING=1", &mut seen);
    let usec: u64 = reloading
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .expect("MONOTONIC_USEC with RELOADING=1")
        .parse()
        .expect("a number");
    assert!(usec > 0);
    let after = next_with(&sock, "READY=1", &mut seen);
    assert!(after.contains("generation 2"), "{after}");

    // A reload refused: READY=1 all the same (the old configuration serves).
    write("[server.bogus]\n");
    child.signal("-HUP");
    next_with(&sock, "RELOADING=1", &mut seen);
    let refused = next_with(&sock, "READY=1", &mut seen);
    assert!(refused.contains("reload refused"), "{refused}");

    // The one-line status: requests per second, hit ratio, objects.
    let status = next_with(&sock, "STATUS=", &mut seen);
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("STATUS="))
        .unwrap()
        .to_string();
    assert!(
        line.contains("req/s") && line.contains("hit ratio") && line.contains("objects"),
        "{line}"
    );

    child.stop();
    next_with(&sock, "STOPPING=1", &mut seen);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn without_notify_socket_nothing_is_sent_and_serve_still_runs() {
    // The common case (a terminal, a test): no variable, no error.
    let child = Served::serve(&["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"]);
    child.stop();
}
