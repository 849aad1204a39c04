//! Operating TLS: `shellac check` names the file of every certificate problem, a reload with a
//! bad certificate keeps the running one, changed files are loaded without a reload (bad ones
//! kept out), the admin API, metrics and dashboard show each certificate and its expiry, and the
//! access log prints what each connection negotiated.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::common::tls::{Pki, all_versions, connect, server_subject, tls_table, write};
use crate::common::{Conn, Shellac, until_stats};
use shellac::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::tls::{origin, tls_of};

#[tokio::test]
async fn check_names_the_file_of_every_certificate_problem() {
    let pki = Pki::new("check");
    let good = pki.leaf("good", &["good.test"]);
    let other = pki.leaf("other", &["other.test"]);
    let expired = pki.leaf_with(
        "expired",
        &["old.test"],
        rcgen::KeyPair::generate().unwrap(),
        |p| {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 1, 1);
        },
    );
    let future = pki.leaf_with(
        "future",
        &["new.test"],
        rcgen::KeyPair::generate().unwrap(),
        |p| {
            p.not_before = rcgen::date_time_ymd(2200, 1, 1);
            p.not_after = rcgen::date_time_ymd(2201, 1, 1);
        },
    );
    let missing = (pki.dir.join("missing.pem"), good.1.clone());
    let mismatched = (good.0.clone(), other.1.clone());
    let not_pem = (write(&pki.dir, "junk.pem", "hello"), good.1.clone());
    let text = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(
            &[&good, &expired, &future, &missing, &mismatched, &not_pem],
            ""
        )
    );
    let config = Config::parse(&text, "t.toml").unwrap();
    let (errors, _) = shellac::preflight::check_machine(&config, &text, "t.toml");
    let messages: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    let has = |needle: &str| messages.iter().any(|m| m.contains(needle));
    assert_eq!(errors.len(), 5, "{messages:#?}");
    assert!(
        has(&format!(
            "{}: the certificate for old.test expired on",
            expired.0.display()
        )),
        "{messages:#?}"
    );
    assert!(
        has(&format!(
            "{}: the certificate for new.test is not valid before",
            future.0.display()
        )),
        "{messages:#?}"
    );
    assert!(
        has(&format!(
            "cannot read certificate file {}: no such file",
            missing.0.display()
        )),
        "{messages:#?}"
    );
    assert!(
        has(&format!(
            "the key in {} does not belong to the certificate in {}",
            other.1.display(),
            good.0.display()
        )),
        "{messages:#?}"
    );
    assert!(
        has(&format!("{}: holds no certificate", not_pem.0.display())),
        "{messages:#?}"
    );
    // serve refuses the same configuration, naming the files.
    let err = shellac::server::start(Arc::new(config))
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("expired on"), "{err}");
}

/// The subject of the certificate a new connection to `addr` gets.
async fn served(addr: std::net::SocketAddr, client: &Arc<rustls::ClientConfig>) -> String {
    server_subject(&connect(addr, client, "site.test").await.expect("handshake"))
}

#[tokio::test]
async fn a_reload_with_a_bad_certificate_keeps_the_running_one() {
    let pki = Pki::new("reload");
    let one = pki.leaf("one", &["site.test"]);
    let two = pki.leaf_with(
        "two",
        &["site.test"],
        rcgen::KeyPair::generate().unwrap(),
        |p| {
            p.distinguished_name
                .push(rcgen::DnType::OrganizationName, "second");
        },
    );
    let other = pki.leaf("other", &["other.test"]);
    let origin = origin().await;
    let file = |cert: &(std::path::PathBuf, std::path::PathBuf)| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n{}\n[[backend]]\nhost = \"{}\"\nport = {}\n",
            tls_table(&[cert], "watch_interval = \"0s\""),
            origin.addr.ip(),
            origin.addr.port()
        )
    };
    let path = write(&pki.dir, "shellac.toml", &file(&one));
    let sh = Shellac::start_reloadable(&path).await;
    let addr = sh.tls_addrs()[0];
    let client = Arc::new(pki.client_config(&all_versions()));
    assert_eq!(served(addr, &client).await, "CN=site.test");
    // An open connection, to carry on through every reload.
    let mut open = Conn::over(connect(addr, &client, "site.test").await.unwrap()).await;
    // A key that is not the certificate's: refused, naming the files; the old one serves.
    let bad = (two.0.clone(), other.1.clone());
    std::fs::write(&path, file(&bad)).unwrap();
    let (status, body) = sh.reload().await;
    assert_ne!(status, 200, "{body}");
    let text = body.to_string();
    assert!(text.contains(&other.1.display().to_string()), "{text}");
    assert!(
        text.contains("does not belong to the certificate"),
        "{text}"
    );
    assert_eq!(served(addr, &client).await, "CN=site.test");
    // A good one: new handshakes get it at once.
    std::fs::write(&path, file(&two)).unwrap();
    let (status, body) = sh.reload().await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served(addr, &client).await, "O=second,CN=site.test");
    assert_eq!(open.send("GET", "/still", &[], b"").await.status, 200);
    assert_eq!(sh.stats().await["tls_reload"], 1);
}

#[tokio::test]
async fn changed_files_are_loaded_without_a_reload_and_bad_ones_are_kept_out() {
    let pki = Pki::new("watch");
    let (cert, key) = pki.leaf("site", &["site.test"]);
    let origin = origin().await;
    let tls = tls_of(&tls_table(
        &[&(cert.clone(), key.clone())],
        "watch_interval = \"100ms\"",
    ));
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let addr = sh.tls_addrs()[0];
    let client = Arc::new(pki.client_config(&all_versions()));
    assert_eq!(served(addr, &client).await, "CN=site.test");
    // A renewal writes new files (as certbot does): picked up within a few intervals.
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
    until_stats(&sh, "the files loaded again", |s| s["tls_reload"] == 1).await;
    assert_eq!(served(addr, &client).await, "O=renewed,CN=site.test");
    // A half-written certificate: an error, and the renewed one keeps serving.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nMIIB").unwrap();
    until_stats(&sh, "the load error", |s| s["tls_reload_error"] == 1).await;
    assert_eq!(served(addr, &client).await, "O=renewed,CN=site.test");
    // Once it is whole again it loads (once: the failed stamps are not retried).
    std::fs::copy(&renewed.0, &cert).unwrap();
    until_stats(&sh, "the repaired file", |s| s["tls_reload"] == 2).await;
    assert_eq!(sh.stats().await["tls_reload_error"], 1);
}

#[tokio::test]
async fn admin_api_metrics_and_dashboard_show_each_certificate_and_its_expiry() {
    let pki = Pki::new("admin");
    let cert = pki.leaf("site", &["site.test", "*.site.test"]);
    let origin = origin().await;
    let tls = tls_of(&tls_table(&[&cert], "name = \"public\""));
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let got = common::get(sh.admin, "/tls").await;
    assert_eq!(got.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    let listener = &v["listeners"][0];
    assert_eq!(listener["name"], "public");
    assert_eq!(listener["listening"][0], sh.tls_addrs()[0].to_string());
    let c = &listener["certificates"][0];
    assert_eq!(c["names"], serde_json::json!(["site.test", "*.site.test"]));
    assert_eq!(c["key"], "ECDSA");
    assert!(c["expires_in_days"].as_i64().unwrap() > 365, "{c}");
    assert!(c["source"].as_str().unwrap().contains("site.pem"));
    let metrics = common::get(sh.admin, "/metrics").await.text();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("shellac_tls_certificate_not_after_seconds{"))
        .expect("the expiry gauge");
    assert!(
        line.contains("listener=\"public\",names=\"site.test,*.site.test\""),
        "{line}"
    );
    assert!(metrics.contains("shellac_tls_handshake_fail_timeout_total 0"));
    let dash: serde_json::Value =
        serde_json::from_slice(&common::get(sh.admin, "/api/dashboard").await.body).unwrap();
    assert_eq!(
        dash["tls"]["certificates"][0]["names"],
        "site.test, *.site.test"
    );
    assert_eq!(dash["tls"]["handshakes"], 0);
    // A failed handshake shows with its reason.
    let mut plain = tokio::net::TcpStream::connect(sh.tls_addrs()[0])
        .await
        .unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut Vec::new())).await;
    until_stats(&sh, "the failure", |s| s["tls_handshake_fail"] == 1).await;
    let dash: serde_json::Value =
        serde_json::from_slice(&common::get(sh.admin, "/api/dashboard").await.body).unwrap();
    assert_eq!(dash["tls"]["failures"], serde_json::json!({"not_tls": 1}));
}

#[tokio::test]
async fn the_access_log_prints_what_each_tls_connection_negotiated() {
    let pki = Pki::new("log");
    let cert = pki.leaf("site", &["site.test"]);
    let alice = pki.client("alice", "alice");
    let origin = origin().await;
    let ca = format!(
        "client_ca = \"{}\"\nclient_auth = \"optional\"",
        pki.ca_file.display()
    );
    let tls = tls_of(&tls_table(&[&cert], &ca));
    let log = pki.dir.join("access.log");
    let log_text = log.to_str().unwrap().to_string();
    let sh = Shellac::start(origin.addr, |c| {
        c.tls = tls;
        c.log.access_log = log_text;
        c.log.format =
            "%U %{cache}x %{tls_version}x %{tls_cipher}x %{tls_sni}x %{tls_alpn}x %{tls_client}x"
                .into();
    })
    .await;
    let mut with_alpn = pki.client_config_with(&all_versions(), Some(&alice));
    with_alpn.alpn_protocols = vec![b"http/1.1".to_vec()];
    let stream = connect(sh.tls_addrs()[0], &Arc::new(with_alpn), "site.test")
        .await
        .unwrap();
    let mut conn = Conn::over(stream).await;
    // A miss (full path), then a hit the gate answers (fast path): both logged alike.
    assert_eq!(conn.send("GET", "/l", &[], b"").await.status, 200);
    assert_eq!(conn.send("GET", "/l", &[], b"").await.status, 200);
    assert_eq!(sh.stats().await["cache_hit_fast"], 1);
    // Cleartext: dashes.
    assert_eq!(common::get(sh.addr, "/plain").await.status, 200);
    let mut lines = common::wait_lines(&log, 3).await;
    lines.sort();
    assert_eq!(
        lines,
        [
            "/l hit TLSv1.3 TLS13_AES_128_GCM_SHA256 site.test http/1.1 CN=alice,O=Shellac tests",
            "/l miss TLSv1.3 TLS13_AES_128_GCM_SHA256 site.test http/1.1 CN=alice,O=Shellac tests",
            "/plain miss - - - - -",
        ]
    );
}
