//! TLS termination end to end: certificates made in the test, rustls clients over loopback,
//! the real proxy. SNI selection, key types, versions, ALPN, resumption (one process and a fleet
//! sharing ticket keys), idle parking of TLS connections, handshake failures by reason, client
//! certificates, a scheme rule. Certificate files and what the operator sees are in `operation`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::common::tls::{Pki, all_versions, connect, refused, server_subject, tls_table};
use crate::common::{Conn, Origin, Reply, Shellac, until_stats};
use shellac::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The `[[tls]]` tables of `text`, to put into a test's configuration.
pub(super) fn tls_of(text: &str) -> Vec<shellac::config::tls::TlsConfig> {
    let full = format!("{text}\n[[backend]]\nhost = \"127.0.0.1\"\n");
    Config::parse(&full, "t.toml")
        .unwrap_or_else(|e| panic!("{e:?}\n{full}"))
        .tls
}

pub(super) async fn origin() -> Origin {
    Origin::start(|seen| Reply::ok(&format!("body of {}", seen.path)).cc("max-age=60")).await
}

#[tokio::test]
async fn hits_over_tls_are_fast_hits_and_the_backend_hears_https() {
    let pki = Pki::new("hit");
    let cert = pki.leaf("site", &["site.test"]);
    let origin = origin().await;
    let tls = tls_of(&tls_table(&[&cert], ""));
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let addr = sh.tls_addrs()[0];
    let client = Arc::new(pki.client_config(&all_versions()));
    let stream = connect(addr, &client, "site.test")
        .await
        .expect("handshake");
    let info = stream.get_ref().1.protocol_version();
    assert_eq!(info, Some(rustls::ProtocolVersion::TLSv1_3));
    let mut conn = Conn::over(stream).await;
    let first = conn.send("GET", "/a", &[("host", "site.test")], b"").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "body of /a");
    let second = conn.send("GET", "/a", &[("host", "site.test")], b"").await;
    assert_eq!(second.text(), "body of /a");
    assert!(
        second.cache_status().contains("hit"),
        "{}",
        second.cache_status()
    );
    let seen = origin.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["x-forwarded-proto"], "https");
    assert!(
        seen[0].headers["forwarded"]
            .to_str()
            .unwrap()
            .ends_with("proto=https")
    );
    let stats = sh.stats().await;
    assert_eq!(stats["tls_handshake"], 1);
    assert_eq!(
        stats["cache_hit_fast"], 1,
        "the hit was answered by the gate"
    );
}

#[tokio::test]
async fn sni_picks_exact_then_wildcard_then_the_default_or_refuses() {
    let pki = Pki::new("sni");
    let default = pki.leaf("default", &["default.test"]);
    let a = pki.leaf("a", &["a.test"]);
    let b = pki.leaf("b", &["*.b.test"]);
    let origin = origin().await;
    let text = format!(
        "{}\n{}",
        tls_table(&[&default, &a, &b], ""),
        tls_table(&[&default, &a, &b], "unknown_name = \"refuse\"")
    );
    let tls = tls_of(&text);
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let (lenient, strict) = (sh.tls_addrs()[0], sh.tls_addrs()[1]);
    // The client trusts the CA; the certificate's names need not match for this check.
    let client = Arc::new(pki.client_config(&all_versions()));
    let subject = |tls: &common::tls::Client| server_subject(tls);
    let got = connect(lenient, &client, "a.test").await.unwrap();
    assert_eq!(subject(&got), "CN=a.test");
    let got = connect(lenient, &client, "x.b.test").await.unwrap();
    assert_eq!(subject(&got), "CN=*.b.test");
    // A wildcard covers one label: the default answers, and the client refuses its name.
    let deep = connect(lenient, &client, "y.x.b.test").await;
    assert!(
        deep.is_err(),
        "the default certificate does not name y.x.b.test"
    );
    // No SNI at all (an IP address is never sent as SNI): the default certificate.
    let no_sni = Arc::new({
        let mut c = pki.client_config(&all_versions());
        c.enable_sni = false;
        c
    });
    let got = connect(lenient, &no_sni, "default.test").await.unwrap();
    assert_eq!(subject(&got), "CN=default.test");
    // Refusing listener: known names work, unknown ones and no SNI are refused.
    assert!(connect(strict, &client, "a.test").await.is_ok());
    assert!(connect(strict, &client, "nope.test").await.is_err());
    assert!(connect(strict, &no_sni, "default.test").await.is_err());
    until_stats(&sh, "two refusals", |s| {
        s["tls_handshake_fail_no_certificate"] == 2
    })
    .await;
}

#[tokio::test]
async fn rsa_and_ecdsa_certificates_for_one_name_each_go_to_clients_that_can_use_them() {
    let pki = Pki::new("rsa");
    let ecdsa = pki.leaf("ecdsa", &["both.test"]);
    let rsa = pki.leaf_rsa("rsa", &["both.test"]);
    let origin = origin().await;
    let tls = tls_of(&tls_table(&[&ecdsa, &rsa], ""));
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let addr = sh.tls_addrs()[0];
    let algorithm = |tls: &common::tls::Client| {
        let cert = &tls.get_ref().1.peer_certificates().unwrap()[0];
        // The SubjectPublicKeyInfo's algorithm: rsaEncryption or id-ecPublicKey.
        let rsa_oid = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
        if cert.windows(rsa_oid.len()).any(|w| w == rsa_oid) {
            "RSA"
        } else {
            "ECDSA"
        }
    };
    let any = Arc::new(pki.client_config(&all_versions()));
    assert_eq!(
        algorithm(&connect(addr, &any, "both.test").await.unwrap()),
        "ECDSA"
    );
    // A client that verifies RSA signatures only (so it offers only RSA schemes).
    let mut provider = rustls::crypto::ring::default_provider();
    let base = provider.signature_verification_algorithms;
    let rsa: Vec<_> = base
        .mapping
        .iter()
        .filter(|(scheme, _)| format!("{scheme:?}").starts_with("RSA"))
        .cloned()
        .collect();
    provider.signature_verification_algorithms = rustls::crypto::WebPkiSupportedAlgorithms {
        all: base.all,
        mapping: Box::leak(rsa.into_boxed_slice()),
    };
    let rsa_only = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(pki.roots())
            .with_no_client_auth(),
    );
    assert_eq!(
        algorithm(&connect(addr, &rsa_only, "both.test").await.unwrap()),
        "RSA"
    );
    assert_eq!(sh.stats().await["tls_handshake"], 2);
}

#[tokio::test]
async fn min_version_refuses_older_clients_and_tls12_still_works_by_default() {
    let pki = Pki::new("ver");
    let cert = pki.leaf("site", &["site.test"]);
    let origin = origin().await;
    let text = format!(
        "{}\n{}",
        tls_table(&[&cert], ""),
        tls_table(&[&cert], "min_version = \"1.3\"")
    );
    let tls = tls_of(&text);
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let (both, only13) = (sh.tls_addrs()[0], sh.tls_addrs()[1]);
    let tls12 = Arc::new(pki.client_config(&[&rustls::version::TLS12]));
    let stream = connect(both, &tls12, "site.test").await.unwrap();
    assert_eq!(
        stream.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    let mut conn = Conn::over(stream).await;
    assert_eq!(conn.send("GET", "/v", &[], b"").await.status, 200);
    assert!(connect(only13, &tls12, "site.test").await.is_err());
    let tls13 = Arc::new(pki.client_config(&[&rustls::version::TLS13]));
    assert!(connect(only13, &tls13, "site.test").await.is_ok());
    until_stats(&sh, "a version refusal", |s| {
        s["tls_handshake_fail_version"] == 1
    })
    .await;
}

/// Connects, sends one request and reads the answer (a TLS 1.3 client gets its session
/// ticket with the first records after the handshake), then closes.
async fn one_request(addr: std::net::SocketAddr, client: &Arc<rustls::ClientConfig>) -> bool {
    let stream = connect(addr, client, "site.test").await.expect("handshake");
    let resumed = matches!(
        stream.get_ref().1.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed)
    );
    let mut conn = Conn::over(stream).await;
    assert_eq!(conn.send("GET", "/r", &[], b"").await.status, 200);
    resumed
}

#[tokio::test]
async fn sessions_resume_with_tickets_in_one_process_and_across_a_fleet() {
    let pki = Pki::new("resume");
    let cert = pki.leaf("site", &["site.test"]);
    let key = pki.dir.join("ticket.key");
    std::fs::write(&key, [7u8; 80]).unwrap();
    let origin = origin().await;
    let plain = tls_table(&[&cert], "");
    let shared = tls_table(
        &[&cert],
        &format!("ticket_key_file = \"{}\"", key.display()),
    );
    let alone = tls_of(&plain);
    let sh = Shellac::start(origin.addr, |c| c.tls = alone).await;
    for versions in [vec![&rustls::version::TLS13], vec![&rustls::version::TLS12]] {
        let client = Arc::new(pki.client_config(&versions));
        assert!(!one_request(sh.tls_addrs()[0], &client).await);
        assert!(one_request(sh.tls_addrs()[0], &client).await, "resumed");
    }
    until_stats(&sh, "resumptions", |s| s["tls_handshake_resumed"] == 2).await;
    // Two nodes sharing the ticket key file: a session made on one resumes on the other.
    let (one, two) = (tls_of(&shared), tls_of(&shared));
    let node1 = Shellac::start(origin.addr, |c| c.tls = one).await;
    let node2 = Shellac::start(origin.addr, |c| c.tls = two).await;
    let client = Arc::new(pki.client_config(&[&rustls::version::TLS13]));
    assert!(!one_request(node1.tls_addrs()[0], &client).await);
    assert!(
        one_request(node2.tls_addrs()[0], &client).await,
        "resumed on the other node"
    );
    // Without the shared file, the first process's tickets mean nothing to the second.
    let client = Arc::new(pki.client_config(&[&rustls::version::TLS13]));
    assert!(!one_request(sh.tls_addrs()[0], &client).await);
    assert!(!one_request(node1.tls_addrs()[0], &client).await);
}

#[tokio::test]
async fn idle_tls_connections_are_parked_and_resume_without_a_new_handshake() {
    let pki = Pki::new("park");
    let cert = pki.leaf("site", &["site.test"]);
    let origin = origin().await;
    let tls = tls_of(&tls_table(&[&cert], ""));
    let sh = Shellac::start(origin.addr, |c| {
        c.tls = tls;
        c.server.idle_release = shellac::config::units::Dur(Duration::from_millis(100));
    })
    .await;
    let client = Arc::new(pki.client_config(&all_versions()));
    let stream = connect(sh.tls_addrs()[0], &client, "site.test")
        .await
        .unwrap();
    let mut conn = Conn::over(stream).await;
    for round in 0..3 {
        let resp = conn.send("GET", "/p", &[], b"").await;
        assert_eq!(resp.status, 200);
        until_stats(&sh, "a release", |s| s["client_idle_released"] > round).await;
        assert_eq!(sh.stats().await["n_client_conn_released"], 1);
    }
    let stats = sh.stats().await;
    assert_eq!(stats["tls_handshake"], 1, "one handshake for every round");
    assert_eq!(stats["client_conn"], 1);
}

#[tokio::test]
async fn failed_handshakes_are_counted_by_reason() {
    let pki = Pki::new("fail");
    let cert = pki.leaf("site", &["site.test"]);
    let origin = origin().await;
    let tls = tls_of(&tls_table(&[&cert], "handshake_timeout = \"300ms\""));
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let addr = sh.tls_addrs()[0];
    // Silent: parked, then closed at the handshake timeout.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buf))
        .await
        .expect("closed by the server")
        .unwrap_or(0);
    assert_eq!(n, 0);
    // A partial ClientHello: a session waits for the rest until the timeout.
    let mut partial = tokio::net::TcpStream::connect(addr).await.unwrap();
    partial
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(10), partial.read(&mut buf))
        .await
        .expect("closed by the server")
        .unwrap_or(0);
    assert_eq!(n, 0);
    // Plain HTTP to the TLS port.
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut Vec::new())).await;
    // A client that does not trust the certificate gives up with an alert.
    let stranger = Pki::new("stranger");
    let distrust = Arc::new(stranger.client_config(&all_versions()));
    assert!(connect(addr, &distrust, "site.test").await.is_err());
    until_stats(&sh, "four failures", |s| s["tls_handshake_fail"] == 4).await;
    let s = sh.stats().await;
    assert_eq!(s["tls_handshake_fail_timeout"], 2, "{s:?}");
    assert_eq!(s["tls_handshake_fail_not_tls"], 1, "{s:?}");
    assert_eq!(s["tls_handshake_fail_peer_alert"], 1, "{s:?}");
    assert_eq!(s["tls_handshake"], 0);
}

#[tokio::test]
async fn alpn_h2_gets_an_http2_session_and_http11_stays_available() {
    let pki = Pki::new("alpn");
    let cert = pki.leaf("site", &["site.test"]);
    let origin = origin().await;
    let text = format!(
        "{}\n{}",
        tls_table(&[&cert], ""),
        tls_table(&[&cert], "alpn = \"http/1.1\"")
    );
    let tls = tls_of(&text);
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let (both, h1only) = (sh.tls_addrs()[0], sh.tls_addrs()[1]);
    let mut h2_client = pki.client_config(&all_versions());
    h2_client.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let h2_client = Arc::new(h2_client);
    let stream = connect(both, &h2_client, "site.test").await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    for _ in 0..2 {
        let req = http::Request::get("https://site.test/h2")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.version(), http::Version::HTTP_2);
        use http_body_util::BodyExt;
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"body of /h2");
    }
    let seen = origin.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "the second was a hit");
    assert_eq!(seen[0].headers["x-forwarded-proto"], "https");
    // The HTTP/1.1-only listener: the same client gets HTTP/1.1.
    let stream = connect(h1only, &h2_client, "site.test").await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    // A client offering only protocols the listener does not serve is refused.
    let mut other = pki.client_config(&all_versions());
    other.alpn_protocols = vec![b"spdy/3".to_vec()];
    assert!(connect(both, &Arc::new(other), "site.test").await.is_err());
    until_stats(&sh, "an ALPN refusal", |s| {
        s["tls_handshake_fail_alpn"] == 1
    })
    .await;
    assert!(sh.stats().await["h2_conn"] >= 1);
}

#[tokio::test]
async fn client_certificates_are_verified_and_their_subject_drives_rules() {
    let pki = Pki::new("mtls");
    let cert = pki.leaf("site", &["site.test"]);
    let alice = pki.client("alice", "alice");
    let stranger_ca = Pki::new("mtls-stranger");
    let mallory = stranger_ca.client("mallory", "mallory");
    let origin = origin().await;
    let ca = format!("client_ca = \"{}\"", pki.ca_file.display());
    let text = format!(
        "{}\n{}\n[[rule]]\nclient_cert = '^$'\nsynth = {{ status = 403, body = \"certificate required\" }}\n",
        tls_table(&[&cert], &ca),
        tls_table(&[&cert], &format!("{ca}\nclient_auth = \"optional\"")),
    );
    let full = format!("{text}\n[[backend]]\nhost = \"127.0.0.1\"\n");
    let parsed = Config::parse(&full, "t.toml").unwrap();
    let sh = Shellac::start(origin.addr, |c| {
        c.tls = parsed.tls;
        c.rules = parsed.rules;
    })
    .await;
    let (required, optional) = (sh.tls_addrs()[0], sh.tls_addrs()[1]);
    let anonymous = Arc::new(pki.client_config(&all_versions()));
    let as_alice = Arc::new(pki.client_config_with(&all_versions(), Some(&alice)));
    let as_mallory = Arc::new(pki.client_config_with(&all_versions(), Some(&mallory)));
    // Required: no certificate, or one from another CA, is refused.
    assert!(refused(required, &anonymous).await);
    assert!(refused(required, &as_mallory).await);
    let stream = connect(required, &as_alice, "site.test").await.unwrap();
    let mut conn = Conn::over(stream).await;
    let resp = conn.send("GET", "/m", &[("host", "site.test")], b"").await;
    assert_eq!(resp.status, 200);
    // Optional: in without one, but the rule answers 403; a bad one is still refused.
    let stream = connect(optional, &anonymous, "site.test").await.unwrap();
    let mut conn = Conn::over(stream).await;
    let resp = conn.send("GET", "/m", &[("host", "site.test")], b"").await;
    assert_eq!(
        (resp.status, resp.text().as_str()),
        (403, "certificate required")
    );
    assert!(refused(optional, &as_mallory).await);
    let stream = connect(optional, &as_alice, "site.test").await.unwrap();
    let mut conn = Conn::over(stream).await;
    assert_eq!(
        conn.send("GET", "/m", &[("host", "site.test")], b"")
            .await
            .status,
        200
    );
    until_stats(&sh, "client certificate refusals", |s| {
        s["tls_handshake_fail_client_cert"] == 3
    })
    .await;
}

#[tokio::test]
async fn a_scheme_rule_sends_cleartext_visitors_to_https_and_leaves_tls_hits_fast() {
    let pki = Pki::new("scheme");
    let cert = pki.leaf("site", &["site.test"]);
    let origin = origin().await;
    let text = format!(
        "{}\n[[rule]]\nscheme = \"http\"\nhost = \"site.test\"\nurl = '^(.*)$'\nredirect = {{ to = \"https://site.test$1\", status = 301 }}\n\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], "")
    );
    let parsed = Config::parse(&text, "t.toml").unwrap();
    let sh = Shellac::start(origin.addr, |c| {
        c.tls = parsed.tls;
        c.rules = parsed.rules;
    })
    .await;
    let resp = common::get_with(sh.addr, "/page?x=1", &[("host", "site.test")]).await;
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("https://site.test/page?x=1"));
    let client = Arc::new(pki.client_config(&all_versions()));
    let stream = connect(sh.tls_addrs()[0], &client, "site.test")
        .await
        .unwrap();
    let mut conn = Conn::over(stream).await;
    for _ in 0..2 {
        let resp = conn
            .send("GET", "/page?x=1", &[("host", "site.test")], b"")
            .await;
        assert_eq!(
            (resp.status, resp.text().as_str()),
            (200, "body of /page?x=1")
        );
    }
    assert_eq!(
        sh.stats().await["cache_hit_fast"],
        1,
        "the TLS hit stayed fast"
    );
}
