//! `[[site]]`s behind `[[tls]]` listeners: SNI picks the certificate, the request's host
//! (`Host`, HTTP/2's `:authority`) picks the site with the same precedence as on cleartext
//! listeners, each TLS address has its own default site, and an address without one answers
//! an unknown name 421 — with rustls clients and curl (HTTP/1.1 and HTTP/2).

use std::sync::Arc;

use super::common::tls::{Client, Pki, all_versions, connect, server_subject};
use super::common::*;
use super::{backend, named, write};

/// One request on a new TLS connection to `addr` naming `sni`, for `host`: (certificate
/// subject, status, body, cache status).
async fn over_tls(
    addr: std::net::SocketAddr,
    client: &Arc<rustls::ClientConfig>,
    sni: &str,
    host: &str,
    path: &str,
) -> (String, u16, String, String) {
    let tls: Client = connect(addr, client, sni)
        .await
        .unwrap_or_else(|e| panic!("handshake for {sni}: {e:?}"));
    let subject = server_subject(&tls);
    let mut conn = Conn::over(tls).await;
    let r = conn.send("GET", path, &[("host", host)], b"").await;
    (subject, r.status, r.text(), r.cache_status().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_behind_tls_listeners_get_certificates_by_sni_and_routing_by_host() {
    let pki = Pki::new("sites");
    let fallback_cert = pki.leaf("fallback", &["fallback.test"]);
    let a_cert = pki.leaf("a", &["a.test", "*.a.test"]);
    let b_cert = pki.leaf("b", &["b.test"]);
    let origins = [
        named("a").await,
        named("wild").await,
        named("b").await,
        named("fallback").await,
        named("plain").await,
    ];
    let names = ["a", "wild", "b", "fallback", "plain"];
    let mut text = String::from("[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n");
    for (n, o) in names.iter().zip(&origins) {
        text.push_str(&backend(n, o));
    }
    // Two TLS addresses with the same certificates: 127.0.0.2 has a default site, 127.0.0.3
    // has none. The first certificate is each listener's default (no SNI, unknown SNI).
    for listen in ["127.0.0.2:0", "127.0.0.3:0"] {
        text.push_str(&format!("[[tls]]\nlisten = \"{listen}\"\n"));
        for (c, k) in [&fallback_cert, &a_cert, &b_cert] {
            text.push_str(&format!(
                "[[tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n",
                c.display(),
                k.display()
            ));
        }
    }
    text.push_str(
        r#"
[[site]]
name = "wild"
listen = "127.0.0.2:0"
server_name = "*.a.test"
backend = "wild"
[[site]]
name = "a"
listen = "127.0.0.2:0"
server_name = ["a.test", "www.a.test"]
backend = "a"
[[site]]
name = "b"
listen = ["127.0.0.2:0", "127.0.0.3:0"]
server_name = "b.test"
backend = "b"
[[site]]
name = "fallback"
listen = "127.0.0.2:0"
default = true
backend = "fallback"
[[site]]
name = "plain"
listen = "127.0.0.1:0"
server_name = "a.test"
default = true
backend = "plain"
"#,
    );
    let dir = temp_dir("sites-tls");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let [with_default, without_default] = shellac.tls_addrs()[..] else {
        panic!("two TLS listeners: {:?}", shellac.tls_addrs())
    };
    let client = Arc::new(pki.client_config(&all_versions()));
    // SNI picks the certificate; the host picks the site, exact names before wildcards.
    let cases = [
        ("a.test", "a.test", "CN=a.test", "a"),
        ("www.a.test", "www.a.test", "CN=a.test", "a"),
        ("x.a.test", "x.a.test", "CN=a.test", "wild"),
        ("b.test", "b.test", "CN=b.test", "b"),
        ("b.test", "B.TEST:443", "CN=b.test", "b"),
        // A name no certificate covers gets the default certificate (the client trusts the
        // CA but checks names: it asks for fallback.test) and no site names it: the default.
        (
            "fallback.test",
            "nobody.test",
            "CN=fallback.test",
            "fallback",
        ),
    ];
    for (sni, host, subject, site) in cases {
        let (got, status, body, _) = over_tls(with_default, &client, sni, host, "/p").await;
        assert_eq!(got, subject, "{sni}");
        assert_eq!(
            (status, body.as_str()),
            (200, &*format!("{site} /p")),
            "{host}"
        );
    }
    // The host, not SNI, chooses the site (as nginx chooses its server by Host): a client
    // that named b.test in its handshake and asks for a.test gets site a.
    let (got, _, body, _) = over_tls(with_default, &client, "b.test", "a.test", "/p").await;
    assert_eq!((got.as_str(), body.as_str()), ("CN=b.test", "a /p"));
    // The address without a default site: its own site answers, an unknown name and a name
    // only another address's sites claim are 421.
    let (_, status, body, _) = over_tls(without_default, &client, "b.test", "b.test", "/q").await;
    assert_eq!((status, body.as_str()), (200, "b /q"));
    for host in ["nobody.test", "a.test"] {
        let (_, status, _, cache) = over_tls(without_default, &client, "b.test", host, "/q").await;
        assert_eq!(status, 421, "{host}");
        assert!(cache.contains("unknown-site"), "{cache}");
    }
    assert_eq!(shellac.stat("client_req_unknown_site").await, 2);
    // The cleartext listener has its own sites: a.test there is another site.
    assert_eq!(
        get_with(shellac.addr, "/c", &[("host", "a.test")])
            .await
            .text(),
        "plain /c"
    );
    // One name on two listeners is one cache key (docs/sites.md): what site a stored over
    // TLS, the cleartext site of the same name serves.
    let r = get_with(shellac.addr, "/p", &[("host", "a.test")]).await;
    assert_eq!(r.text(), "a /p");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    // One cache, keys with the host: the second request for a site's path over TLS is a hit
    // on that site's object, not the other site's.
    let (_, _, body, cache) = over_tls(with_default, &client, "a.test", "a.test", "/p").await;
    assert_eq!(body, "a /p");
    assert!(cache.contains("hit"), "{cache}");
    let (_, _, body, cache) = over_tls(with_default, &client, "b.test", "b.test", "/p").await;
    assert_eq!(body, "b /p");
    assert!(cache.contains("hit"), "{cache}");
    // HTTP/2 over TLS (curl, ALPN h2): `:authority` chooses the site.
    if let Some(curl) = tools::require(tools::which("curl"), "curl", "curl") {
        let port = with_default.port();
        for (name, site) in [("www.a.test", "a"), ("x.a.test", "wild"), ("b.test", "b")] {
            let out = tokio::process::Command::new(&curl)
                .args(["-si", "--http2", "--cacert"])
                .arg(&pki.ca_file)
                .args([
                    "--resolve",
                    &format!("{name}:{port}:127.0.0.2"),
                    &format!("https://{name}:{port}/h2"),
                ])
                .output()
                .await
                .expect("curl runs");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.starts_with("HTTP/2 200"),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(text.ends_with(&format!("{site} /h2")), "{name}: {text}");
        }
    }
    let metrics = get(shellac.admin, "/metrics").await.text();
    assert!(
        metrics.contains("shellac_site_req_total{site=\"fallback\"} 1"),
        "{metrics}"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}
