//! ACME end to end against a real ACME server: Debian's pebble (tests/common/pebble.rs),
//! validating for real (HTTP-01 and TLS-ALPN-01) against the Shellac under test on loopback.
//! A certificate is obtained, served and verified against pebble's issuing root, kept on disk
//! and served again after a restart without a new order, renewed on demand without dropping
//! connections, and kept in service while the ACME server a reload named cannot be reached
//! (failures counted, retried with backoff); a client offering ALPN `acme-tls/1` alone never
//! gets a certificate outside a validation; a failed validation leaves handshakes for the name
//! refused. Pebble requires external account binding (RFC 8555 §7.3.4): accounts are bound
//! with `eab_kid` / `eab_hmac_key`, and refused with the reason without them. `shellac check`
//! names the file, line and key of bad acme settings.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::pebble::Pebble;
use common::tls::{Client, connect};
use common::{Conn, Origin, Reply, Shellac, TempDir, get, request};
use rustls::ClientConfig;
use serde_json::Value;

/// What every test against pebble starts from: pebble, its validation ports held for the
/// test (they are fixed: one test at a time), an origin, and a directory with the `state`
/// directory the `[[tls.acme]]` tables name.
struct Setup {
    pebble: &'static Pebble,
    origin: Origin,
    dir: TempDir,
    state: PathBuf,
    /// Declared last: released after the rest is dropped, as a test's own local was.
    _ports: tokio::sync::MutexGuard<'static, ()>,
}

impl Setup {
    /// `None` (the test is skipped) when pebble is not installed.
    async fn new(name: &str) -> Option<Setup> {
        let pebble = Pebble::get()?;
        let ports = pebble.lock().await;
        let origin = Origin::start(|seen| Reply::ok(&format!("origin saw {}", seen.path))).await;
        let dir = TempDir::new(name);
        let state = dir.path("state");
        Some(Setup {
            pebble,
            origin,
            dir,
            state,
            _ports: ports,
        })
    }

    /// The `[[tls.acme]]` table for `localhost` validated by `challenge`, plus `extra`.
    fn acme(&self, challenge: &str, extra: &str) -> String {
        self.pebble
            .acme_table(&["localhost"], challenge, &self.state, extra)
    }

    /// Writes the configuration file with `acme` (see [`config`]).
    fn config(&self, acme: &str) -> PathBuf {
        config(&self.dir, self.pebble, &self.origin, acme)
    }
}

/// A configuration file for Shellac on pebble's validation ports: cleartext on `http_port`,
/// TLS on `tls_port` with `acme` (the `[[tls.acme]]` tables).
fn config(dir: &TempDir, pebble: &Pebble, origin: &Origin, acme: &str) -> PathBuf {
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:{}\"\nadmin = \"127.0.0.1:0\"\n\n[[tls]]\nname = \"public\"\nlisten = \"127.0.0.1:{}\"\n{acme}\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
        pebble.http_port,
        pebble.tls_port,
        origin.addr.port()
    );
    let path = dir.path("shellac.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts Shellac on `path`, waiting (at most 10 s) for pebble's fixed validation ports while
/// a previous test's Shellac (one that panicked, so was not stopped) releases them.
async fn start(path: &Path) -> Shellac {
    let mut last = None;
    for _ in 0..100 {
        match Shellac::try_start_reloadable(path).await {
            Ok(sh) => return sh,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("shellac starts: {last:?}");
}

/// `GET /acme`: the first certificate's state.
async fn acme_state(sh: &Shellac) -> Value {
    let resp = get(sh.admin, "/acme").await;
    assert_eq!(resp.status, 200);
    let v: Value = serde_json::from_slice(&resp.body).unwrap();
    v["certificates"][0].clone()
}

/// Waits (at most 60 s) until the first certificate's state satisfies `cond`.
async fn until_acme(
    sh: &Shellac,
    pebble: &Pebble,
    what: &str,
    cond: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..600 {
        let st = acme_state(sh).await;
        if cond(&st) {
            return st;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let st = acme_state(sh).await;
    let log = pebble.log();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    panic!(
        "timed out waiting for {what}: {st:#}\npebble's log (last lines, newest first):\n{}",
        tail.join("\n")
    );
}

/// A client that trusts only what pebble issues.
async fn client_config(pebble: &Pebble) -> Arc<ClientConfig> {
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(pebble.issuing_roots().await)
            .with_no_client_auth();
    // Every connection a full handshake: a resumed one shows the certificate of the session
    // it resumes, not the one in service now.
    let mut config = config;
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

/// The certificate the server presented (DER).
fn presented(tls: &Client) -> Vec<u8> {
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .as_ref()
        .to_vec()
}

/// A verified TLS connection to the listener for `name`, and one request over it.
async fn fetch_over_tls(pebble: &Pebble, roots: &Arc<ClientConfig>, name: &str) -> (Vec<u8>, Conn) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], pebble.tls_port));
    let tls = connect(addr, roots, name)
        .await
        .unwrap_or_else(|e| panic!("TLS to {name} verified against pebble's root: {e}"));
    let der = presented(&tls);
    let mut conn = Conn::over(tls).await;
    let resp = conn.send("GET", "/page", &[("host", name)], b"").await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.text(), "origin saw /page");
    (der, conn)
}

/// `tls_handshake_fail_no_certificate` once it is past `before` (waiting at most 2 s: the
/// counter is raised after the refused client sees its handshake fail).
async fn refused_since(sh: &Shellac, before: u64) -> u64 {
    let mut refused = before;
    for _ in 0..100 {
        refused = sh.stat("tls_handshake_fail_no_certificate").await;
        if refused > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    refused
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn http01_certificate_is_obtained_served_and_kept_across_a_restart() {
    let Some(t) = Setup::new("acme-http01").await else {
        return;
    };
    let (pebble, state) = (t.pebble, &t.state);
    let path = t.config(&t.acme("http-01", ""));

    let sh = start(&path).await;
    let st = until_acme(&sh, pebble, "a certificate", |s| s["state"] == "valid").await;
    assert_eq!(st["names"], serde_json::json!(["localhost"]));
    assert_eq!(st["failures"], 0);
    assert!(st["not_after"].as_i64().unwrap() > st["renew_at"].as_i64().unwrap());
    let roots = client_config(pebble).await;
    let (first, _) = fetch_over_tls(pebble, &roots, "localhost").await;
    let stats = sh.stats().await;
    assert_eq!(stats["acme_issued"], 1, "{stats:?}");
    assert_eq!(stats["acme_renewed"], 0);
    assert!(stats["acme_order"] >= 1);
    assert!(
        stats["acme_challenge_http"] >= 1,
        "pebble fetched the token from us"
    );
    assert_eq!(stats["acme_loaded"], 0);
    // What is kept on disk, and how.
    let account_dir = std::fs::read_dir(state.join("accounts"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(mode(&account_dir.join("account.key")), 0o600);
    assert_eq!(mode(&account_dir.join("account.json")), 0o600);
    let account: Value =
        serde_json::from_slice(&std::fs::read(account_dir.join("account.json")).unwrap()).unwrap();
    assert_eq!(
        account["contact"],
        serde_json::json!(["mailto:ops@shellac.test"])
    );
    let cert_dir = state.join("certificates/localhost");
    assert_eq!(mode(&cert_dir.join("certificate.pem")), 0o600);
    assert_eq!(mode(&cert_dir.join("meta.json")), 0o600);
    assert_eq!(mode(state), 0o700);
    // /metrics has the certificate's expiry.
    let metrics = get(sh.admin, "/metrics").await.text();
    let expiry = format!(
        "shellac_acme_certificate_expiry_seconds{{listener=\"public\",name=\"localhost\"}} {}",
        st["not_after"]
    );
    assert!(metrics.contains(&expiry), "{metrics}");
    sh.stop().await;

    // A restart serves the kept certificate from the first handshake, without an order.
    let sh = start(&path).await;
    let (again, _) = fetch_over_tls(pebble, &roots, "localhost").await;
    assert_eq!(again, first, "the kept certificate");
    let st = acme_state(&sh).await;
    assert_eq!(st["state"], "valid", "{st:#}");
    assert!(st["obtained_at"].is_null(), "loaded, not obtained: {st:#}");
    // Give the worker a moment to (wrongly) order; it must not.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = sh.stats().await;
    assert_eq!(stats["acme_loaded"], 1);
    assert_eq!(stats["acme_order"], 0, "no new order after a restart");
    sh.stop().await;
}

#[tokio::test]
async fn tls_alpn01_certificate_renews_on_demand_without_dropping_connections() {
    let Some(t) = Setup::new("acme-tlsalpn").await else {
        return;
    };
    let (pebble, state) = (t.pebble, &t.state);
    // No cleartext listener is needed for TLS-ALPN-01; keep one for the harness' address.
    let path = t.config(&t.acme("tls-alpn-01", ""));
    let sh = start(&path).await;
    let st = until_acme(&sh, pebble, "a certificate", |s| s["state"] == "valid").await;
    let first_fingerprint = st["fingerprint"].as_str().unwrap().to_string();
    let stats = sh.stats().await;
    assert!(
        stats["acme_challenge_tls"] >= 1,
        "pebble validated over acme-tls/1"
    );
    assert_eq!(stats["acme_challenge_http"], 0);
    let roots = client_config(pebble).await;
    let (first, mut kept) = fetch_over_tls(pebble, &roots, "localhost").await;

    // Renew now: a new certificate for new connections, the open one carries on.
    let resp = request(sh.admin, "POST", "/acme/renew?name=localhost", &[], b"").await;
    assert_eq!(resp.status, 202, "{}", resp.text());
    let st = until_acme(&sh, pebble, "the renewed certificate", |s| {
        s["state"] == "valid" && s["fingerprint"].as_str() != Some(&first_fingerprint)
    })
    .await;
    assert_eq!(st["failures"], 0);
    let stats = sh.stats().await;
    assert_eq!(stats["acme_issued"], 2, "{stats:?}");
    assert_eq!(stats["acme_renewed"], 1);
    assert!(stats["acme_challenge_tls"] >= 2);
    let (second, _) = fetch_over_tls(pebble, &roots, "localhost").await;
    assert_ne!(second, first, "new connections get the renewed certificate");
    let resp = kept
        .send("GET", "/again", &[("host", "localhost")], b"")
        .await;
    assert_eq!(
        resp.status, 200,
        "the connection opened before the renewal still works"
    );
    assert_eq!(resp.text(), "origin saw /again");
    // The stored certificate is the renewed one.
    let pem = std::fs::read(state.join("certificates/localhost/certificate.pem")).unwrap();
    let stored = shellac::acme::files::from_pem(&pem, &pem).unwrap();
    assert_eq!(stored.key.cert[0].as_ref(), second.as_slice());

    // An unknown name is a 404.
    let resp = request(sh.admin, "POST", "/acme/renew?name=other.test", &[], b"").await;
    assert_eq!(resp.status, 404);

    // Outside a validation, a client offering only acme-tls/1 gets no certificate at all; one
    // that offers it among others gets the real certificate and its protocol.
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], pebble.tls_port));
    let with_alpn = |protocols: &[&[u8]]| {
        let mut c = (*roots).clone();
        c.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        Arc::new(c)
    };
    let refused_before = sh.stat("tls_handshake_fail_no_certificate").await;
    assert!(
        connect(addr, &with_alpn(&[b"acme-tls/1"]), "localhost")
            .await
            .is_err()
    );
    let tls = connect(addr, &with_alpn(&[b"http/1.1", b"acme-tls/1"]), "localhost")
        .await
        .expect("a normal client offering acme-tls/1 too");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(presented(&tls), second);
    assert_eq!(refused_since(&sh, refused_before).await, refused_before + 1);
    sh.stop().await;
}

#[tokio::test]
async fn an_unreachable_acme_server_leaves_the_last_good_certificate_in_service() {
    let Some(t) = Setup::new("acme-unreachable").await else {
        return;
    };
    let pebble = t.pebble;
    let path = t.config(&t.acme("http-01", ""));
    let sh = start(&path).await;
    until_acme(&sh, pebble, "a certificate", |s| s["state"] == "valid").await;
    let roots = client_config(pebble).await;
    let (good, _) = fetch_over_tls(pebble, &roots, "localhost").await;

    // A reload points the certificate at an ACME server nothing listens on (a port bound then
    // released).
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let acme = t
        .acme("http-01", "retry_min = \"50ms\"\nretry_max = \"200ms\"")
        .replace(&pebble.directory, &format!("https://{dead}/dir"));
    t.config(&acme);
    let (status, body) = sh.reload().await;
    assert_eq!(status, 200, "{body}");
    // A certificate from another ACME server is replaced: attempts start at once and fail.
    let st = until_acme(&sh, pebble, "failures in a row", |s| {
        s["failures"].as_u64() >= Some(3)
    })
    .await;
    assert_eq!(st["state"], "retrying", "{st:#}");
    let error = st["last_error"].as_str().unwrap();
    assert!(
        error.starts_with("network: ") && error.contains("connect"),
        "{error}"
    );
    assert!(st["next_attempt"].is_i64(), "{st:#}");
    let stats = sh.stats().await;
    assert!(
        stats["acme_fail"] >= 3 && stats["acme_fail_network"] >= 3,
        "{stats:?}"
    );
    assert_eq!(
        stats["acme_issued"], 1,
        "only the first certificate: {stats:?}"
    );
    assert_eq!(
        stats["acme_loaded"], 1,
        "the new worker took the kept certificate"
    );
    let before = stats["acme_fail"];
    let (served, _) = fetch_over_tls(pebble, &roots, "localhost").await;
    assert_eq!(served, good, "the last good certificate stays in service");
    // And the failures keep coming, each after its backoff.
    let mut later = before;
    for _ in 0..100 {
        later = sh.stat("acme_fail").await;
        if later > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(later > before, "the failure counter rises");
    let metrics = get(sh.admin, "/metrics").await.text();
    assert!(
        metrics
            .contains("shellac_acme_certificate_failures{listener=\"public\",name=\"localhost\"}"),
        "{metrics}"
    );
    sh.stop().await;
}

#[tokio::test]
async fn a_failed_validation_leaves_the_name_refused_not_self_signed() {
    let Some(t) = Setup::new("acme-invalid").await else {
        return;
    };
    let (pebble, state) = (t.pebble, &t.state);
    // The cleartext listener is not where pebble's validation connects: nothing answers
    // there, the challenge fails.
    let path = t.config(&t.acme("http-01", "retry_min = \"1h\""));
    let text = std::fs::read_to_string(&path).unwrap().replace(
        &format!("127.0.0.1:{}\"\nadmin", pebble.http_port),
        "127.0.0.1:0\"\nadmin",
    );
    std::fs::write(&path, text).unwrap();
    let sh = start(&path).await;
    let st = until_acme(&sh, pebble, "a failed validation", |s| s["failures"] == 1).await;
    assert_eq!(st["state"], "retrying");
    assert!(st["not_after"].is_null(), "no certificate: {st:#}");
    assert!(st["next_attempt"].is_i64(), "{st:#}");
    let error = st["last_error"].as_str().unwrap();
    assert!(
        error.starts_with("validation: ") && error.contains("localhost"),
        "{error}"
    );
    let stats = sh.stats().await;
    assert_eq!(stats["acme_fail_validation"], 1, "{stats:?}");
    assert_eq!(stats["acme_challenge_http"], 0);
    // No certificate yet: the handshake is refused, not answered with a self-signed one.
    let roots = client_config(pebble).await;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], pebble.tls_port));
    assert!(connect(addr, &roots, "localhost").await.is_err());
    assert_eq!(refused_since(&sh, 0).await, 1);
    assert!(!state.join("certificates").exists(), "nothing stored");
    sh.stop().await;
}

/// Pebble requires external account binding, as ZeroSSL or Google Trust Services do: every
/// other test of this file registers with `eab_kid` / `eab_hmac_key` (Pebble::acme_table).
/// Without them the account is refused, the error says why, and nothing is stored.
#[tokio::test]
async fn an_account_without_the_required_external_binding_is_refused_with_the_reason() {
    let Some(t) = Setup::new("acme-no-eab").await else {
        return;
    };
    let (pebble, state) = (t.pebble, &t.state);
    let acme = t
        .acme("tls-alpn-01", "retry_min = \"1h\"")
        .lines()
        .filter(|l| !l.starts_with("eab_"))
        .collect::<Vec<_>>()
        .join("\n");
    let path = t.config(&acme);
    let sh = start(&path).await;
    let st = until_acme(&sh, pebble, "a refused account", |s| s["failures"] == 1).await;
    let error = st["last_error"].as_str().unwrap().to_lowercase();
    assert!(
        error.contains("externalaccount") && error.contains("set `eab_kid` and `eab_hmac_key`"),
        "{error}"
    );
    assert_eq!(sh.stats().await["acme_issued"], 0);
    assert!(
        !state.join("certificates").exists(),
        "no certificate stored"
    );
    sh.stop().await;

    // With the binding, the account is registered (its key kept for the next start).
    let path = t.config(&t.acme("tls-alpn-01", ""));
    let sh = start(&path).await;
    until_acme(&sh, pebble, "a certificate", |s| s["state"] == "valid").await;
    let keys: Vec<_> = walk(state)
        .into_iter()
        .filter(|p| p.ends_with("account.key"))
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let mode = std::fs::metadata(&keys[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // The key the first run made (the CA refused to register it) was set aside, not reused.
    let aside = walk(state)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("account.key.unregistered-"))
        .count();
    assert_eq!(aside, 1);
    sh.stop().await;
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn check_names_file_line_and_key_of_bad_acme_settings() {
    let dir = TempDir::new("acme-check");
    let file = dir.path("bad.toml");
    std::fs::write(&file, "[server]\nlisten = \"127.0.0.1:0\"\n\n[[tls]]\nlisten = \"127.0.0.1:0\"\n\n[[tls.acme]]\nnames = [\"*.example.com\"]\ndirectory = \"http://acme.example/dir\"\ncontact = \"nobody\"\neab_hmac_key = \"not base64!\"\neab_kid = \"k\"\n\n[[backend]]\nhost = \"127.0.0.1\"\n").unwrap();
    let out = std::process::Command::new(common::binary::BIN)
        .args(["check", file.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    for (line, key, words) in [
        (8, "tls.0.acme.0.names.0", "DNS-01"),
        (9, "tls.0.acme.0.directory", "https://"),
        (10, "tls.0.acme.0.contact.0", "e-mail address"),
        (11, "tls.0.acme.0.eab_hmac_key", "base64url"),
    ] {
        let found = err.lines().any(|l| {
            l.contains(&format!("{}:{line}", file.display()))
                && l.contains(key)
                && l.contains(words)
        });
        assert!(found, "line {line} `{key}` ({words}) in:\n{err}");
    }

    // A state directory that cannot be made: a file stands where a parent should be.
    let blocker = dir.path("blocker");
    std::fs::write(&blocker, "").unwrap();
    let state = blocker.join("acme");
    std::fs::write(&file, format!("[server]\nlisten = \"127.0.0.1:0\"\n\n[[tls]]\nlisten = \"127.0.0.1:0\"\n\n[[tls.acme]]\nnames = \"example.com\"\nstate_dir = \"{}\"\n\n[[backend]]\nhost = \"127.0.0.1\"\n", state.display())).unwrap();
    let out = std::process::Command::new(common::binary::BIN)
        .args(["check", file.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains(&format!("{}:9", file.display()))
                && l.contains("state_dir")
                && l.contains("not a directory")),
        "{err}"
    );
}
