//! Socket activation (`shellac.socket`): `shellac serve` started by `systemd-socket-activate`
//! (which holds the listening sockets and passes them as `$LISTEN_FDS`, as systemd does)
//! takes the sockets matching its configured addresses — `server.listen`, a `[[tls]]`
//! listener, `server.admin` — instead of binding them, binds what was not passed, and closes
//! a passed socket no address matches. The connection that started it, made before Shellac
//! ran, waited in the passed socket's queue and is answered.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::common::binary::{BIN, Served};
use crate::common::tls::{Pki, all_versions, connect, tls_table};
use crate::common::tools::{require, which};
use crate::common::{Origin, Reply, free_ports_below_ephemeral, get, temp_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_come_from_listen_fds_matched_by_address_tls_and_admin_included() {
    let Some(activate) = require(
        which("systemd-socket-activate"),
        "systemd-socket-activate",
        "systemd",
    ) else {
        return;
    };
    let origin = Origin::start(|_| Reply::ok("activated").cc("max-age=60")).await;
    let dir = temp_dir("socket-activation");
    let pki = Pki::new("activation");
    let cert = pki.leaf("site", &["site.test"]);
    // systemd-socket-activate needs fixed addresses. Ports taken from the ephemeral range (a
    // listener bound to port 0 and closed) were racy: another test's listener could be given
    // one before systemd-socket-activate bound it, and the first request then went there.
    let ports: Vec<SocketAddr> = free_ports_below_ephemeral(4)
        .into_iter()
        .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
        .collect();
    let (plain, tls, admin, stray) = (ports[0], ports[1], ports[2], ports[3]);
    let config = dir.join("shellac.toml");
    let tls_text = tls_table(&[&cert], "").replace("127.0.0.1:0", &tls.to_string());
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"{plain}\", \"127.0.0.1:0\"]\nadmin = \"{admin}\"\n\n{tls_text}\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            origin.addr.port()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(activate);
    for addr in [plain, tls, admin, stray] {
        cmd.arg("-l").arg(addr.to_string());
    }
    cmd.args([
        "--fdname=web:tls:admin:stray",
        "--",
        BIN,
        "serve",
        "--config",
    ])
    .arg(&config);
    // systemd-socket-activate starts Shellac on the first connection, as systemd does: that
    // connection waits in the passed socket's queue and is answered, not refused.
    let first = std::thread::spawn(move || {
        use std::io::{Read, Write};
        // Until systemd-socket-activate has bound it (it starts at the same time).
        let mut c = (0..400)
            .find_map(|_| {
                std::net::TcpStream::connect(plain)
                    .map_err(|_| std::thread::sleep(Duration::from_millis(25)))
                    .ok()
            })
            .expect("systemd-socket-activate listens");
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(b"GET /first HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        answer
    });
    let served = Served::start(cmd);
    let answer = first.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // Every passed socket that matches an address was taken: had Shellac bound one of those
    // addresses itself, the bind would have failed (the passed socket holds it) and serve
    // would not have started.
    // All of them serve: the cleartext listener, the TLS one (handshake and request), the
    // admin one; the address not passed (127.0.0.1:0) was bound by Shellac itself.
    assert_eq!(served.admin, admin);
    assert_eq!(get(plain, "/a").await.status, 200);
    assert_ne!(
        served.proxy, plain,
        "the second listen address, bound by Shellac"
    );
    assert_eq!(get(served.proxy, "/a").await.status, 200);
    let client = Arc::new(pki.client_config(&all_versions()));
    let mut tls_conn = connect(tls, &client, "site.test")
        .await
        .expect("TLS handshake");
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tls_conn
        .write_all(b"GET /a HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tls_conn.read_to_end(&mut answer).await.ok();
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let stats = Command::new(BIN)
        .args(["stats", "--admin", &admin.to_string()])
        .output()
        .unwrap();
    assert!(stats.status.success());
    // The stray socket is closed: nothing listens there any more.
    assert!(std::net::TcpStream::connect(stray).is_err());
    served.stop();
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&pki.dir).ok();
}
