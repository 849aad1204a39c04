//! TLS to backends: a TLS origin (a second Shellac terminating TLS in front of a plain
//! origin), verified against a CA file, refused with the wrong CA or name, accepted with
//! `insecure_skip_verify`, client certificates presented, probes over TLS.

use std::time::Duration;

use crate::common::tls::{Pki, tls_table};
use crate::common::{Origin, Reply, Shellac, get};
use shellac::config::{BackendTls, Config};

/// A TLS origin for `origin.test` answering with `origin`'s bodies; `extra`: more `[[tls]]`
/// keys (client certificates).
async fn tls_origin(pki: &Pki, origin: &Origin, extra: &str) -> (Shellac, u16) {
    let cert = pki.leaf("origin", &["origin.test"]);
    let text = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], extra)
    );
    let tls = Config::parse(&text, "t.toml").unwrap().tls;
    let sh = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let port = sh.tls_addrs()[0].port();
    (sh, port)
}

/// A Shellac whose backend is `127.0.0.1:port` over TLS as `tls` says.
async fn front(port: u16, tls: BackendTls, probe: bool) -> Shellac {
    let origin_addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    Shellac::start(origin_addr, move |c| {
        c.backends[0].tls = Some(tls);
        if probe {
            let text = "[[backend]]\nhost = \"127.0.0.1\"\nprobe = { url = \"/health\", interval = \"100ms\", window = 3, threshold = 2 }\n";
            c.backends[0].probe = Config::parse(text, "t.toml").unwrap().backends[0].probe.clone();
        }
    })
    .await
}

async fn origin() -> Origin {
    Origin::start(|seen| Reply::ok(&format!("origin says {}", seen.path))).await
}

fn with_ca(pki: &Pki) -> BackendTls {
    BackendTls {
        server_name: Some("origin.test".into()),
        ca: Some(pki.ca_file.clone()),
        ..BackendTls::default()
    }
}

#[tokio::test]
async fn a_backend_over_tls_is_verified_with_its_ca_and_name() {
    let pki = Pki::new("backend");
    let plain = origin().await;
    let (_tls_origin, port) = tls_origin(&pki, &plain, "").await;
    let sh = front(port, with_ca(&pki), false).await;
    let resp = get(sh.addr, "/x").await;
    assert_eq!((resp.status, resp.text().as_str()), (200, "origin says /x"));
    let s = sh.stats().await;
    assert_eq!(s["backend_tls_handshake"], 1);
    assert_eq!(s["backend_tls_fail"], 0);
    // Another CA: refused, 503, counted.
    let stranger = Pki::new("backend-stranger");
    let sh = front(port, with_ca(&stranger), false).await;
    let resp = get(sh.addr, "/y").await;
    assert_eq!(resp.status, 503);
    assert!(
        resp.cache_status().contains("backend-connect-failed"),
        "{}",
        resp.cache_status()
    );
    assert!(sh.stats().await["backend_tls_fail"] >= 1);
    // The right CA, the wrong name: refused too.
    let wrong_name = BackendTls {
        server_name: Some("other.test".into()),
        ..with_ca(&pki)
    };
    let sh = front(port, wrong_name, false).await;
    assert_eq!(get(sh.addr, "/z").await.status, 503);
    // Without `ca`, the system's store: our test CA is not in it.
    let system = BackendTls {
        server_name: Some("origin.test".into()),
        ..BackendTls::default()
    };
    let sh = front(port, system, false).await;
    assert_eq!(get(sh.addr, "/s").await.status, 503);
    // insecure_skip_verify: anything goes.
    let insecure = BackendTls {
        insecure_skip_verify: true,
        ..BackendTls::default()
    };
    let sh = front(port, insecure, false).await;
    assert_eq!(get(sh.addr, "/i").await.status, 200);
}

#[tokio::test]
async fn client_certificates_are_presented_to_backends_that_ask() {
    let pki = Pki::new("backend-mtls");
    let plain = origin().await;
    let ca = format!("client_ca = \"{}\"", pki.ca_file.display());
    let (tls_origin, port) = tls_origin(&pki, &plain, &ca).await;
    let (cert, key) = pki.client("shellac", "shellac-front");
    let with_cert = BackendTls {
        cert: Some(cert),
        key: Some(key),
        ..with_ca(&pki)
    };
    let sh = front(port, with_cert, false).await;
    assert_eq!(get(sh.addr, "/c").await.status, 200);
    let sh = front(port, with_ca(&pki), false).await;
    // With TLS 1.3 the backend judges the client's certificate after the client's handshake
    // is done: its alert arrives in place of the response, a 502.
    assert_eq!(
        get(sh.addr, "/c").await.status,
        502,
        "no certificate, no entry"
    );
    assert!(tls_origin.stats().await["tls_handshake_fail_client_cert"] >= 1);
}

#[tokio::test]
async fn probes_run_over_tls_and_a_bad_certificate_makes_the_backend_sick() {
    let pki = Pki::new("backend-probe");
    let plain = origin().await;
    let (_tls_origin, port) = tls_origin(&pki, &plain, "").await;
    let healthy = front(port, with_ca(&pki), true).await;
    let stranger = Pki::new("backend-probe-stranger");
    let sick = front(port, with_ca(&stranger), true).await;
    let health = |sh: &Shellac| {
        let admin = sh.admin;
        async move {
            let v: serde_json::Value =
                serde_json::from_slice(&get(admin, "/backends").await.body).unwrap();
            v["backends"][0]["healthy"].as_bool().unwrap()
        }
    };
    let mut seen = (false, true);
    for _ in 0..100 {
        seen = (health(&healthy).await, health(&sick).await);
        if seen == (true, false) && healthy.stats().await["backend_tls_handshake"] >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, (true, false));
    let probes = plain
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.path == "/health")
        .count();
    assert!(
        probes >= 2,
        "probes reached the origin through TLS: {probes}"
    );
}

#[tokio::test]
async fn check_and_reload_name_unusable_backend_tls_files() {
    let pki = Pki::new("backend-check");
    let missing = pki.dir.join("nope.pem");
    let text = format!(
        "[[backend]]\nhost = \"origin.test\"\ntls = {{ ca = \"{}\" }}\n",
        missing.display()
    );
    let config = Config::parse(&text, "t.toml").unwrap();
    let (errors, _) = shellac::preflight::check_machine(&config, &text, "t.toml");
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0].to_string();
    assert!(
        e.contains(&format!(
            "cannot read certificate file {}",
            missing.display()
        )),
        "{e}"
    );
    assert!(e.contains("backend.0.tls"), "{e}");
    let half = Config::parse(
        "[[backend]]\nhost = \"a\"\ntls = { cert = \"/x.pem\" }\n",
        "t.toml",
    )
    .unwrap_err();
    assert!(
        half[0].to_string().contains("needs both `cert` and `key`"),
        "{half:?}"
    );
}

/// Issue 20: HTTP/2 to a backend over TLS (`protocol = "h2"` with `tls`): ALPN `h2` is
/// negotiated with the verified backend, requests share one multiplexed connection, and the
/// backend serves them as HTTP/2 (its `h2_conn`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_to_a_backend_over_tls() {
    let pki = Pki::new("backend-h2");
    let plain = origin().await;
    let (tls_origin, port) = tls_origin(&pki, &plain, "").await;
    let origin_addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let sh = Shellac::start(origin_addr, |c| {
        c.backends[0].tls = Some(with_ca(&pki));
        c.backends[0].protocol = shellac::config::BackendProtocol::H2;
    })
    .await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let addr = sh.addr;
        tasks.push(tokio::spawn(
            async move { get(addr, &format!("/h2/{i}")).await },
        ));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let resp = t.await.unwrap();
        assert_eq!(
            (resp.status, resp.text()),
            (200, format!("origin says /h2/{i}"))
        );
    }
    // Sequential ones after: the connection is reused.
    let resp = get(sh.addr, "/h2/again").await;
    assert_eq!(resp.status, 200);
    let s = sh.stats().await;
    assert_eq!(s["backend_h2_conn"], s["backend_conn"], "{s:?}");
    assert!(s["backend_h2_conn"] >= 1);
    assert_eq!(s["backend_tls_handshake"], s["backend_conn"]);
    assert_eq!(s["backend_tls_fail"], 0);
    assert!(s["backend_reuse"] >= 1, "{s:?}");
    // The TLS origin served HTTP/2 (ALPN h2), as many connections as Shellac opened.
    let o = tls_origin.stats().await;
    assert_eq!(o["h2_conn"], s["backend_conn"], "{o:?}");
    assert_eq!(o["h2_req"], 9);
}

/// A backend's CA file replaced on disk (the backend moved to a new CA): new connections use
/// the new file within a few seconds, without a reload; a replacement that does not load
/// keeps the one in use, counted once.
#[tokio::test]
async fn renewed_backend_tls_files_are_used_without_a_reload() {
    let pki = Pki::new("backend-renew");
    let old_ca = Pki::new("backend-renew-old");
    let plain = origin().await;
    let (_tls_origin, port) = tls_origin(&pki, &plain, "").await;
    // The CA file in use is the old CA's: the origin's certificate is not trusted yet.
    let ca_file = old_ca.dir.join("in-use-ca.pem");
    std::fs::copy(&old_ca.ca_file, &ca_file).unwrap();
    let tls = BackendTls {
        ca: Some(ca_file.clone()),
        ..with_ca(&pki)
    };
    let origin_addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let sh = Shellac::start(origin_addr, move |c| {
        c.backends[0].tls = Some(tls);
        c.backends[0].max_idle = 0; // a new connection (and TLS handshake) per request
    })
    .await;
    assert_eq!(get(sh.addr, "/before").await.status, 503);

    // The new CA, written as a deployment tool would (a new file renamed over the old one).
    let tmp = ca_file.with_extension("tmp");
    std::fs::copy(&pki.ca_file, &tmp).unwrap();
    std::fs::rename(&tmp, &ca_file).unwrap();
    let mut status = 0;
    for i in 0..100 {
        status = get(sh.addr, &format!("/after/{i}")).await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "the renewed CA file was not used");
    assert_eq!(sh.stats().await["backend_tls_reload"], 1);

    // A half-written file: the CA in use stays, the failure is counted once.
    std::fs::write(&ca_file, "-----BEGIN CERTIFICATE-----\nMIIB").unwrap();
    let mut errors = 0;
    for i in 0..100 {
        assert_eq!(get(sh.addr, &format!("/kept/{i}")).await.status, 200);
        errors = sh.stats().await["backend_tls_reload_error"];
        if errors > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(errors, 1, "the bad file was not noticed");
    for i in 0..3 {
        assert_eq!(get(sh.addr, &format!("/still/{i}")).await.status, 200);
    }
    let s = sh.stats().await;
    assert_eq!(
        (s["backend_tls_reload"], s["backend_tls_reload_error"]),
        (1, 1)
    );
}
