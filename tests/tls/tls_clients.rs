//! TLS with real clients: curl (HTTP/1.1 and HTTP/2 by ALPN), openssl s_client (SNI, session
//! resumption with -sess_out / -sess_in), Python's ssl module, and testssl.sh asserting that
//! no weak protocol or cipher is offered. Each skips without its tool unless
//! SHELLAC_REQUIRE_TOOLS=1 (CI installs them: .ci/run's TOOLS).

use crate::common;

use crate::common::tls::{Pki, tls_table};
use crate::common::{Origin, Reply, Shellac, tools};
use shellac::config::Config;
use tokio::process::Command;

/// A Shellac with one TLS listener for `site.test` (and `*.site.test`), plus `extra` keys.
async fn start(pki: &Pki, extra: &str) -> (Origin, Shellac) {
    let cert = pki.leaf("site", &["site.test", "*.site.test"]);
    let origin =
        Origin::start(|seen| Reply::ok(&format!("body of {}", seen.path)).cc("max-age=60")).await;
    let text = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], extra)
    );
    let tls = Config::parse(&text, "t.toml").unwrap().tls;
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    (origin, sh)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_over_tls_with_http11_and_h2() {
    let Some(curl) = tools::require(tools::which("curl"), "curl", "curl") else {
        return;
    };
    let pki = Pki::new("curl");
    let (_origin, sh) = start(&pki, "").await;
    let port = sh.tls_addrs()[0].port();
    let resolve = format!("site.test:{port}:127.0.0.1");
    let url = format!("https://site.test:{port}/c");
    for (flag, line, expect) in [
        ("--http1.1", "HTTP/1.1 200", "fwd=miss"),
        ("--http2", "HTTP/2 200", "hit"),
    ] {
        let out = Command::new(&curl)
            .args(["-si", flag, "--cacert"])
            .arg(&pki.ca_file)
            .args(["--resolve", &resolve, &url])
            .output()
            .await
            .expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with(line),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(expect), "{text}");
        assert!(text.ends_with("body of /c"), "{text}");
    }
    // A name the certificate does not cover: curl refuses it (the default certificate).
    let out = Command::new(&curl)
        .args(["-s", "--cacert"])
        .arg(&pki.ca_file)
        .args([
            "--resolve",
            &format!("other.test:{port}:127.0.0.1"),
            &format!("https://other.test:{port}/"),
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(60), "certificate problem");
}

/// `openssl s_client` with `-sess_out`, then `-sess_in`: the second connection resumes
/// (TLS 1.2 and TLS 1.3), and reports the SNI-chosen certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openssl_s_client_resumes_sessions() {
    let Some(openssl) = tools::require(tools::which("openssl"), "openssl", "openssl") else {
        return;
    };
    let pki = Pki::new("s_client");
    let (_origin, sh) = start(&pki, "").await;
    let connect = sh.tls_addrs()[0].to_string();
    for version in ["-tls1_2", "-tls1_3"] {
        let sess = pki.dir.join(format!("sess{version}.pem"));
        let mut outputs = Vec::new();
        for arg in ["-sess_out", "-sess_in"] {
            let out = s_client(&openssl, &connect, version, &pki.ca_file, arg, &sess).await;
            outputs.push(out);
        }
        assert!(
            outputs[0].contains("subject=CN = site.test"),
            "{}",
            outputs[0]
        );
        assert!(
            outputs[0].contains("Verify return code: 0 (ok)"),
            "{}",
            outputs[0]
        );
        assert!(outputs[0].contains("New, TLSv1."), "{}", outputs[0]);
        assert!(
            outputs[1].contains("Reused, TLSv1."),
            "{version}: {}",
            outputs[1]
        );
    }
    let s = sh.stats().await;
    assert!(s["tls_handshake_resumed"] >= 2, "{s:?}");
    // Two servers sharing a ticket-key file: a session made on one resumes on the other.
    let key = pki.dir.join("ticket.key");
    let rand = Command::new(&openssl)
        .args(["rand", "-out"])
        .arg(&key)
        .arg("80")
        .output()
        .await
        .unwrap();
    assert!(rand.status.success());
    let shared = format!("ticket_key_file = \"{}\"", key.display());
    let (_o1, one) = start(&pki, &shared).await;
    let (_o2, two) = start(&pki, &shared).await;
    let sess = pki.dir.join("fleet.pem");
    let mut outputs = Vec::new();
    for (node, arg) in [(&one, "-sess_out"), (&two, "-sess_in")] {
        let out = s_client(
            &openssl,
            &node.tls_addrs()[0].to_string(),
            "-tls1_3",
            &pki.ca_file,
            arg,
            &sess,
        )
        .await;
        outputs.push(out);
    }
    assert!(outputs[1].contains("Reused, TLSv1.3"), "{}", outputs[1]);
    assert_eq!(two.stats().await["tls_handshake_resumed"], 1);
}

/// One `openssl s_client` connection that sends a request and reads to the server's close;
/// its standard output.
async fn s_client(
    openssl: &std::path::Path,
    connect: &str,
    version: &str,
    ca: &std::path::Path,
    sess_arg: &str,
    sess: &std::path::Path,
) -> String {
    use tokio::io::AsyncWriteExt;
    let mut child = Command::new(openssl)
        .args([
            "s_client",
            version,
            "-connect",
            connect,
            "-servername",
            "a.site.test",
        ])
        .args(["-ign_eof", "-CAfile"])
        .arg(ca)
        .arg(sess_arg)
        .arg(sess)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"GET /s HTTP/1.1\r\nHost: a.site.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("openssl ends when the server closes")
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Python's ssl module: verified connection with SNI, the negotiated version, and a resumed
/// session (`session=` / `session_reused`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_ssl_verifies_and_resumes() {
    let Some(python) = tools::require(tools::which("python3"), "python3", "python3") else {
        return;
    };
    let pki = Pki::new("python");
    let (_origin, sh) = start(&pki, "").await;
    let port = sh.tls_addrs()[0].port();
    let script = format!(
        r#"
import socket, ssl
ctx = ssl.create_default_context(cafile={ca:?})
ctx.maximum_version = ssl.TLSVersion.TLSv1_2
def get(session=None):
    with socket.create_connection(("127.0.0.1", {port})) as raw:
        with ctx.wrap_socket(raw, server_hostname="py.site.test", session=session) as s:
            s.sendall(b"GET /py HTTP/1.1\r\nHost: py.site.test\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return s.version(), s.session, s.session_reused, data
v, sess, reused, data = get()
assert v == "TLSv1.2", v
assert not reused
assert data.startswith(b"HTTP/1.1 200"), data
assert data.endswith(b"body of /py"), data
v, _, reused, _ = get(sess)
assert reused, "not resumed"
print("ok")
"#,
        ca = pki.ca_file.display().to_string(),
        port = port
    );
    let out = Command::new(&python)
        .args(["-c", &script])
        .output()
        .await
        .expect("python runs");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// testssl.sh (Debian's `testssl`): protocols and the standard cipher categories only, so it
/// stays short (~15 s). Nothing below TLS 1.2, no NULL / anonymous / export / LOW / 3DES /
/// "average" (CBC) ciphers; no finding of medium severity or worse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn testssl_finds_no_weak_protocol_or_cipher() {
    let Some(testssl) = tools::require(tools::which("testssl"), "testssl", "testssl.sh") else {
        return;
    };
    let pki = Pki::new("testssl");
    let (_origin, sh) = start(&pki, "").await;
    let target = sh.tls_addrs()[0].to_string();
    let json = pki.dir.join("testssl.json");
    let out = Command::new(&testssl)
        .args([
            "--protocols",
            "--std",
            "--quiet",
            "--color",
            "0",
            "--warnings",
            "off",
            "--fast",
            "--sneaky",
            "--connect-timeout",
            "5",
            "--openssl-timeout",
            "5",
            "--jsonfile",
        ])
        .arg(&json)
        .arg(&target)
        .output()
        .await
        .expect("testssl runs");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "no JSON from testssl ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let findings: Vec<serde_json::Value> = serde_json::from_str(&text).expect("testssl JSON");
    let finding = |id: &str| {
        findings
            .iter()
            .find(|f| f["id"] == id)
            .and_then(|f| f["finding"].as_str())
            .unwrap_or_else(|| panic!("testssl reported no {id}: {text}"))
            .to_string()
    };
    for weak in ["SSLv2", "SSLv3", "TLS1", "TLS1_1"] {
        assert!(
            finding(weak).starts_with("not offered"),
            "{weak}: {}",
            finding(weak)
        );
    }
    assert!(
        finding("TLS1_2").starts_with("offered"),
        "{}",
        finding("TLS1_2")
    );
    assert!(
        finding("TLS1_3").starts_with("offered"),
        "{}",
        finding("TLS1_3")
    );
    for weak in [
        "cipherlist_NULL",
        "cipherlist_aNULL",
        "cipherlist_EXPORT",
        "cipherlist_LOW",
        "cipherlist_3DES_IDEA",
        // testssl 3.0: CBC and other "average" ciphers.
        "cipherlist_AVERAGE",
    ] {
        assert!(
            finding(weak).starts_with("not offered"),
            "{weak}: {}",
            finding(weak)
        );
    }
    assert!(finding("cipherlist_STRONG").starts_with("offered"));
    let bad: Vec<&serde_json::Value> = findings
        .iter()
        .filter(|f| matches!(f["severity"].as_str(), Some("HIGH" | "CRITICAL" | "MEDIUM")))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Two `shellac serve` processes sharing a ticket-key file: a session `openssl s_client`
/// made with one resumes on the other. Then `SIGHUP` makes one load a renewed certificate.
#[test]
fn two_processes_share_ticket_keys_and_sighup_reloads_certificates() {
    let Some(openssl) = tools::require(tools::which("openssl"), "openssl", "openssl") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pki = Pki::new("processes");
    let (cert, key) = pki.leaf("site", &["site.test", "*.site.test"]);
    let origin = rt.block_on(Origin::start(|seen| {
        Reply::ok(&format!("body of {}", seen.path))
    }));
    let ticket = pki.dir.join("ticket.key");
    std::fs::write(&ticket, (0..80u8).collect::<Vec<u8>>()).unwrap();
    let serve = |name: &str| {
        let config = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[[tls]]\nlisten = \"127.0.0.1:0\"\nticket_key_file = \"{}\"\nwatch_interval = \"0s\"\n[[tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            ticket.display(),
            cert.display(),
            key.display(),
            origin.addr.port()
        );
        let path = common::tls::write(&pki.dir, name, &config);
        let served = common::binary::Served::serve(&["--config", path.to_str().unwrap()]);
        // Logged right after the admin address (bounded: a missing line fails the test).
        let mut tls = None;
        while tls.is_none() {
            let line = served
                .log
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("the TLS address in the log");
            tls = line
                .split("TLS listening on ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .map(str::to_string);
        }
        let tls = tls.unwrap();
        (served, tls)
    };
    let (one, one_addr) = serve("one.toml");
    let (two, two_addr) = serve("two.toml");
    let sess = pki.dir.join("sess.pem");
    let first = rt.block_on(s_client(
        &openssl,
        &one_addr,
        "-tls1_3",
        &pki.ca_file,
        "-sess_out",
        &sess,
    ));
    assert!(first.contains("New, TLSv1.3"), "{first}");
    let second = rt.block_on(s_client(
        &openssl,
        &two_addr,
        "-tls1_3",
        &pki.ca_file,
        "-sess_in",
        &sess,
    ));
    assert!(
        second.contains("Reused, TLSv1.3"),
        "resumed in the other process: {second}"
    );
    // A renewed certificate in place, then SIGHUP: new handshakes get it.
    let renewed = pki.leaf_with(
        "renewed",
        &["site.test"],
        rcgen::KeyPair::generate().unwrap(),
        |p| {
            p.distinguished_name
                .push(rcgen::DnType::OrganizationName, "renewed");
        },
    );
    std::fs::copy(&renewed.0, &cert).unwrap();
    std::fs::copy(&renewed.1, &key).unwrap();
    two.signal("-HUP");
    let mut seen = String::new();
    for _ in 0..100 {
        seen = rt.block_on(s_client(
            &openssl,
            &two_addr,
            "-tls1_3",
            &pki.ca_file,
            "-sess_out",
            &pki.dir.join("x.pem"),
        ));
        if seen.contains("O = renewed") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        seen.contains("subject=CN = site.test, O = renewed"),
        "{seen}"
    );
    one.stop();
    two.stop();
}
