//! What PHP is told: every CGI parameter, over TCP and a Unix socket, `REMOTE_ADDR` from
//! trusted proxies and from the PROXY protocol (and `HTTPS` over TLS), a ten megabyte upload,
//! and each site's own document root.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_sees_every_cgi_parameter() {
    let Some(fpm) = fpm() else { return };
    // The script's lookup kept for the whole test, whatever the machine's load.
    let sh = shellac_with(fpm, false, |c| {
        c.backends[0].open_file_cache_valid =
            shellac::config::units::Dur(Duration::from_secs(3600));
    })
    .await;
    let r = get_with(
        sh.addr,
        "/server.php/extra/path?x=1&y=%20",
        &[
            ("cookie", "a=1"),
            ("proxy", "http://evil.example:8080"),
            ("x-custom", "yes"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = json(&r);
    let root = fpm.root.display().to_string();
    for (k, want) in [
        ("SCRIPT_FILENAME", format!("{root}/server.php")),
        ("SCRIPT_NAME", "/server.php".into()),
        ("PATH_INFO", "/extra/path".into()),
        ("QUERY_STRING", "x=1&y=%20".into()),
        ("REQUEST_METHOD", "GET".into()),
        ("REQUEST_URI", "/server.php/extra/path?x=1&y=%20".into()),
        ("DOCUMENT_ROOT", root.clone()),
        ("SERVER_NAME", "test.example".into()),
        // The listener the request came in on, not the Host's (absent) port: nginx's
        // $server_addr and $server_port.
        ("SERVER_PORT", sh.addr.port().to_string()),
        ("SERVER_ADDR", "127.0.0.1".into()),
        ("SERVER_PROTOCOL", "HTTP/1.1".into()),
        ("REMOTE_ADDR", "127.0.0.1".into()),
        ("HTTP_HOST", "test.example".into()),
        ("HTTP_COOKIE", "a=1".into()),
        ("HTTP_X_CUSTOM", "yes".into()),
        ("GATEWAY_INTERFACE", "CGI/1.1".into()),
    ] {
        assert_eq!(v[k], want.as_str(), "{k}: {v}");
    }
    assert!(
        v["REMOTE_PORT"]
            .as_str()
            .is_some_and(|p| p.parse::<u16>().is_ok()),
        "{v}"
    );
    assert!(v.get("HTTP_PROXY").is_none(), "httpoxy: {v}");
    assert!(v.get("HTTPS").is_none(), "{v}");
    let body = b"a=1&b=2";
    let r = request(
        sh.addr,
        "POST",
        "/server.php",
        &[("content-type", "application/x-www-form-urlencoded")],
        body,
    )
    .await;
    let v = json(&r);
    assert_eq!(v["REQUEST_METHOD"], "POST");
    assert_eq!(v["CONTENT_TYPE"], "application/x-www-form-urlencoded");
    assert_eq!(v["CONTENT_LENGTH"], "7");
    // Kept connections were used again.
    for _ in 0..3 {
        get(sh.addr, "/server.php").await;
    }
    let b: serde_json::Value =
        serde_json::from_slice(&get(sh.admin, "/backends").await.body).unwrap();
    assert!(b["backends"][0]["reuse"].as_u64().unwrap() >= 1, "{b}");
    // The script was looked up on disk once; the other requests found it kept (bench/ab2009.sh
    // phpinfo: every request's lookup went to the blocking pool).
    assert_eq!(b["backends"][0]["files_cache_miss"], 1, "{b}");
    assert!(
        b["backends"][0]["files_cache_hit"].as_u64().unwrap() >= 4,
        "{b}"
    );
    assert_eq!(b["backends"][0]["files_cache_entries"], 1, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_over_a_unix_socket() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, true).await;
    let r = get(sh.addr, "/server.php").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(json(&r)["SCRIPT_NAME"], "/server.php");
    let r = get(sh.addr, "/blog/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "blog index"));
}

/// A multipart upload of 10 MB reaches PHP whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_megabyte_upload() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let size = 10 << 20;
    let mut body = Vec::with_capacity(size + 512);
    let b = "shellacboundary";
    body.extend_from_slice(
        format!("--{b}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nphoto\r\n--{b}\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
    );
    body.extend(std::iter::repeat_n(b'x', size));
    body.extend_from_slice(format!("\r\n--{b}--\r\n").as_bytes());
    let ct = format!("multipart/form-data; boundary={b}");
    let r = request(
        sh.addr,
        "POST",
        "/upload.php",
        &[("content-type", &ct)],
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = json(&r);
    assert_eq!(v["size"], size, "{v}");
    assert_eq!(v["error"], 0, "{v}");
    assert_eq!(v["name"], "photo", "{v}");
}

/// Behind a load balancer in `trusted_proxies`, REMOTE_ADDR is the client it forwarded for,
/// not the balancer; from anyone else `X-Forwarded-For` is not believed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_addr_honours_trusted_proxies() {
    let Some(fpm) = fpm() else { return };
    let trusted = shellac_with(fpm, false, |c| {
        c.server.trusted_proxies =
            vec![shellac::config::invalidation::Network::parse("127.0.0.0/8").unwrap()];
    })
    .await;
    let xff = [("x-forwarded-for", "198.51.100.9, 203.0.113.7")];
    let v = json(&get_with(trusted.addr, "/server.php", &xff).await);
    assert_eq!(v["REMOTE_ADDR"], "203.0.113.7", "{v}");
    let untrusted = shellac(fpm, false).await;
    let v = json(&get_with(untrusted.addr, "/server.php", &xff).await);
    assert_eq!(v["REMOTE_ADDR"], "127.0.0.1", "{v}");
}

/// Behind a load balancer speaking the PROXY protocol, REMOTE_ADDR is the client the header
/// names; over TLS the script sees HTTPS=on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_addr_from_the_proxy_protocol_and_https_over_tls() {
    use common::tls::{Pki, all_versions, tls_table};
    use tokio::io::AsyncWriteExt;
    let Some(fpm) = fpm() else { return };
    let pki = Pki::new("fcgi");
    let cert = pki.leaf("site", &["site.test"]);
    let table = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], "")
    );
    let tls = shellac::config::Config::parse(&table, "t.toml")
        .unwrap()
        .tls;
    let sh = shellac_with(fpm, false, |c| {
        c.server.proxy_protocol = shellac::config::proxy_protocol::ProxyProtocol::All;
        c.server.proxy_protocol_from =
            vec![shellac::config::invalidation::Network::parse("127.0.0.0/8").unwrap()];
        c.tls = tls;
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(sh.addr).await.unwrap();
    tcp.write_all(b"PROXY TCP4 203.0.113.5 127.0.0.1 5555 80\r\n")
        .await
        .unwrap();
    let mut conn = Conn::over(tcp).await;
    let v = json(&conn.send("GET", "/server.php", &[], b"").await);
    assert_eq!(v["REMOTE_ADDR"], "203.0.113.5", "{v}");
    assert_eq!(v["REMOTE_PORT"], "5555", "{v}");
    assert!(v.get("HTTPS").is_none(), "{v}");

    let mut tcp = tokio::net::TcpStream::connect(sh.tls_addrs()[0])
        .await
        .unwrap();
    tcp.write_all(b"PROXY TCP4 198.51.100.7 127.0.0.1 4444 443\r\n")
        .await
        .unwrap();
    let client = std::sync::Arc::new(pki.client_config(&all_versions()));
    let name = rustls::pki_types::ServerName::try_from("site.test").unwrap();
    let tls_conn = rustls::ClientConnection::new(client, name).unwrap();
    let mut stream = shellac::tls::stream::TlsStream::from_parts(tcp, tls_conn);
    stream.handshake().await.expect("TLS after the header");
    let mut conn = Conn::over(stream).await;
    let r = conn
        .send("GET", "/server.php", &[("host", "site.test")], b"")
        .await;
    let v = json(&r);
    assert_eq!(v["HTTPS"], "on", "{v}");
    assert_eq!(v["REQUEST_SCHEME"], "https", "{v}");
    assert_eq!(v["REMOTE_ADDR"], "198.51.100.7", "{v}");
    assert_eq!(v["SERVER_NAME"], "site.test", "{v}");
}

/// `[[site]] root`: two sites share one PHP-FPM pool, each running scripts from its own
/// document root (SCRIPT_FILENAME, DOCUMENT_ROOT); a script only the other root has is 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_runs_scripts_from_its_own_root() {
    let Some(fpm) = fpm() else { return };
    let dir = TempDir::new("fcgi-site-root");
    let other = dir.path("other");
    std::fs::create_dir_all(other.join("uploads")).unwrap();
    std::fs::write(other.join("server.php"), FIXTURES[0].1).unwrap();
    std::fs::write(other.join("uploads/evil.jpg"), "<?php echo 'EVIL';").unwrap();
    let other = std::fs::canonicalize(other).unwrap();
    let sh = shellac_with(fpm, false, |c| {
        c.sites = vec![
            shellac::config::site::SiteConfig {
                name: "other".into(),
                server_name: vec!["other.test".into()],
                root: Some(other.clone()),
                cache: true,
                ..Default::default()
            },
            shellac::config::site::SiteConfig {
                name: "main".into(),
                default: true,
                cache: true,
                ..Default::default()
            },
        ];
    })
    .await;
    let v = json(&get_with(sh.addr, "/server.php", &[("host", "other.test")]).await);
    let root = other.display().to_string();
    assert_eq!(v["SCRIPT_FILENAME"], format!("{root}/server.php"), "{v}");
    assert_eq!(v["DOCUMENT_ROOT"], root, "{v}");
    let v = json(&get_with(sh.addr, "/server.php", &[("host", "main.test")]).await);
    let main = fpm.root.display().to_string();
    assert_eq!(v["SCRIPT_FILENAME"], format!("{main}/server.php"), "{v}");
    for path in ["/info.php", "/uploads/evil.jpg/x.php", "/pretty/url"] {
        let r = get_with(sh.addr, path, &[("host", "other.test")]).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert!(!r.text().contains("EVIL"), "{path}");
    }
}
