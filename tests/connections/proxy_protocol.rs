//! The PROXY protocol (v1 and v2) from a balancer in front: the client named in the log,
//! `X-Forwarded-For` and VCL's `client.ip` and ACLs; missing, malformed, late and
//! untrusted headers close the connection; it comes before TLS and the HTTP/2 preface; and
//! a backend sent one of its own on a connection of its own.

use super::*;

// PROXY protocol on client listeners (`server.proxy_protocol`): real v1 text and v2 binary
// headers written by hand on real sockets, the client address they name read back where the
// proxy uses it.

const V2_SIG: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// A v2 `PROXY` header over TCP/IPv4.
pub(super) fn v2_tcp4(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
    let mut h = V2_SIG.to_vec();
    h.extend_from_slice(&[0x21, 0x11, 0, 12]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h
}

/// A v2 `PROXY` header over TCP/IPv6, with a TLV (PP2_TYPE_AUTHORITY) after the addresses.
fn v2_tcp6(src: std::net::Ipv6Addr, dst: std::net::Ipv6Addr) -> Vec<u8> {
    let mut h = V2_SIG.to_vec();
    h.extend_from_slice(&[0x21, 0x21, 0, 36 + 7]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(&4711u16.to_be_bytes());
    h.extend_from_slice(&443u16.to_be_bytes());
    h.extend_from_slice(b"\x02\x00\x04site");
    h
}

pub(super) fn get_close(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t.example\r\nConnection: close\r\n\r\n").into_bytes()
}

pub(super) fn behind_balancer(c: &mut shellac::config::Config, from: &str) {
    c.server.proxy_protocol = shellac::config::proxy_protocol::ProxyProtocol::All;
    c.server.proxy_protocol_from =
        vec![shellac::config::invalidation::Network::parse(from).unwrap()];
}

pub(super) fn forwarded_for(origin: &Origin, path: &str) -> String {
    let seen = origin.seen.lock().unwrap();
    let s = seen
        .iter()
        .find(|s| s.path == path)
        .unwrap_or_else(|| panic!("the origin saw no {path}"));
    s.headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_v1_and_v2_name_the_client_in_the_log_and_x_forwarded_for() {
    let dir = TempDir::new("pp-log");
    let log = dir.0.join("access.log");
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let path = log.to_str().unwrap().to_string();
    let shellac = start(&origin, |c| {
        behind_balancer(c, "127.0.0.0/8");
        c.log.access_log = path;
        c.log.format = "%h %U".into();
    })
    .await;
    let wait = Duration::from_secs(5);
    let v1 = b"PROXY TCP4 203.0.113.7 127.0.0.1 40001 80\r\n".to_vec();
    let v2 = v2_tcp4([198, 51, 100, 9], 40002, [127, 0, 0, 1], 80);
    let v6 = v2_tcp6(
        "2001:db8::5".parse().unwrap(),
        "2001:db8::1".parse().unwrap(),
    );
    // A v2 LOCAL header (the balancer's own health check): the peer's address stands.
    let local = [V2_SIG, &[0x20, 0x00, 0, 0]].concat();
    for (header, path) in [(v1, "/v1"), (v2, "/v2"), (v6, "/v6"), (local, "/local")] {
        let e = exchange(shellac.addr, &[header, get_close(path)].concat(), wait).await;
        assert_eq!(e.statuses(), vec![200], "{path}: {}", e.text);
    }
    // A header split over two segments is waited for, then read exactly.
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"PROXY TCP4 192.0.2.44 127.0.0.1 ")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.write_all(&[&b"5 80\r\n"[..], &get_close("/split")].concat())
        .await
        .unwrap();
    let mut text = String::new();
    let _ = tokio::time::timeout(wait, s.read_to_string(&mut text)).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");

    assert_eq!(forwarded_for(&origin, "/v1"), "203.0.113.7");
    assert_eq!(forwarded_for(&origin, "/v2"), "198.51.100.9");
    assert_eq!(forwarded_for(&origin, "/v6"), "2001:db8::5");
    assert_eq!(forwarded_for(&origin, "/local"), "127.0.0.1");
    assert_eq!(forwarded_for(&origin, "/split"), "192.0.2.44");
    let mut lines = wait_lines(&log, 5).await;
    lines.sort();
    assert_eq!(
        lines,
        [
            "127.0.0.1 /local",
            "192.0.2.44 /split",
            "198.51.100.9 /v2",
            "2001:db8::5 /v6",
            "203.0.113.7 /v1"
        ]
    );
    assert_eq!(shellac.stat("client_proxy").await, 5);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_closes_missing_malformed_late_and_untrusted_connections() {
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let shellac = start(&origin, |c| {
        behind_balancer(c, "127.0.0.0/8");
        c.server.header_read_timeout = Dur(Duration::from_millis(300));
    })
    .await;
    let wait = Duration::from_secs(5);
    let mut bad_version = v2_tcp4([192, 0, 2, 1], 1, [127, 0, 0, 1], 80);
    bad_version[12] = 0x31;
    for (bytes, what) in [
        (get_close("/plain"), "no header"),
        (
            [
                &b"PROXY TCP4 203.0.113.300 127.0.0.1 1 80\r\n"[..],
                &get_close("/a"),
            ]
            .concat(),
            "v1 address out of range",
        ),
        ([bad_version, get_close("/b")].concat(), "v2 version 3"),
        (b"PROXY TCP4 ".to_vec(), "a header never finished"),
    ] {
        let e = exchange(shellac.addr, &bytes, wait).await;
        assert!(e.closed && e.text.is_empty(), "{what}: {e:?}", e = e.text);
    }
    // A client that closes without a byte.
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.shutdown().await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, s.read_to_end(&mut out)).await;
    assert!(out.is_empty());
    until_stats(&shellac, "the refusals counted", |s| {
        s["client_proxy_missing"] == 2
            && s["client_proxy_malformed"] == 2
            && s["client_proxy_timeout"] == 1
    })
    .await;
    assert_eq!(shellac.stat("client_proxy").await, 0);
    assert_eq!(origin.count(), 0);
    shellac.stop().await;

    // A peer outside proxy_protocol_from is closed whatever it sends.
    let shellac = start(&origin, |c| behind_balancer(c, "10.0.0.0/8")).await;
    let header = b"PROXY TCP4 203.0.113.7 127.0.0.1 40001 80\r\n";
    let e = exchange(
        shellac.addr,
        &[&header[..], &get_close("/u")].concat(),
        wait,
    )
    .await;
    assert!(e.closed && e.text.is_empty(), "{}", e.text);
    assert_eq!(shellac.stat("client_proxy_untrusted").await, 1);
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_comes_before_the_tls_handshake_and_the_http2_preface() {
    use common::tls::{Pki, all_versions, tls_table};
    use shellac::tls::stream::TlsStream;
    let pki = Pki::new("pp");
    let cert = pki.leaf("site", &["site.test"]);
    let table = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], "")
    );
    let tls = shellac::config::Config::parse(&table, "t.toml")
        .unwrap()
        .tls;
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let shellac = start(&origin, move |c| {
        behind_balancer(c, "127.0.0.1");
        c.tls = tls;
        c.http2.h2c = shellac::config::http2::H2c::All;
    })
    .await;

    // TLS: the header, then the ClientHello on the same connection.
    let mut tcp = TcpStream::connect(shellac.tls_addrs()[0]).await.unwrap();
    tcp.write_all(&v2_tcp4([198, 51, 100, 20], 1234, [127, 0, 0, 1], 443))
        .await
        .unwrap();
    let client = std::sync::Arc::new(pki.client_config(&all_versions()));
    let name = rustls::pki_types::ServerName::try_from("site.test").unwrap();
    let conn = rustls::ClientConnection::new(client, name).unwrap();
    let mut tls = TlsStream::from_parts(tcp, conn);
    tls.handshake().await.expect("TLS after the header");
    tls.write_all(&get_close("/tls")).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_eq!(forwarded_for(&origin, "/tls"), "198.51.100.20");

    // h2c with prior knowledge: the header, then the preface.
    let mut tcp = TcpStream::connect(shellac.addr).await.unwrap();
    tcp.write_all(b"PROXY TCP6 2001:db8::77 ::1 999 80\r\n")
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("HTTP/2 after the header");
    tokio::spawn(conn);
    let req = http::Request::get("http://t.example/h2")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.expect("HTTP/2 response");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(forwarded_for(&origin, "/h2"), "2001:db8::77");
    assert_eq!(shellac.stat("client_proxy").await, 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_client_is_client_ip_and_acls_in_vcl() {
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let vcl = r#"vcl 4.1;
backend default { ${origin0} }
acl blocked { "203.0.113.0"/24; }
sub vcl_recv {
    if (client.ip ~ blocked) { return (synth(403, "blocked")); }
}
sub vcl_deliver { set resp.http.x-client = client.ip; }
"#;
    let shellac = common::vcl::start_vcl_with("pp", vcl, &[origin.addr], |c| {
        behind_balancer(c, "127.0.0.1")
    })
    .await;
    let wait = Duration::from_secs(5);
    let header = b"PROXY TCP4 203.0.113.7 127.0.0.1 40001 80\r\n";
    let e = exchange(
        shellac.addr,
        &[&header[..], &get_close("/acl")].concat(),
        wait,
    )
    .await;
    assert_eq!(e.statuses(), vec![403], "{}", e.text);
    let header = v2_tcp4([198, 51, 100, 1], 5, [127, 0, 0, 1], 80);
    let e = exchange(shellac.addr, &[header, get_close("/ok")].concat(), wait).await;
    assert_eq!(e.statuses(), vec![200], "{}", e.text);
    assert!(
        e.text
            .to_ascii_lowercase()
            .contains("x-client: 198.51.100.1\r\n"),
        "{}",
        e.text
    );
    shellac.stop().await;
}

// PROXY protocol to backends (`[[backend]] proxy_protocol`).

/// Reads a PROXY protocol header as an origin behind HAProxy's `accept-proxy` would (the
/// test's own reader, not Shellac's): `"v1 IP"`, `"v2 IP"`, `"LOCAL"`, `"UNKNOWN"`, or None
/// for anything else.
async fn read_proxy_header(stream: &mut TcpStream) -> Option<String> {
    let mut fixed = [0u8; 16];
    stream.read_exact(&mut fixed[..6]).await.ok()?;
    if &fixed[..6] == b"PROXY " {
        let mut line = b"PROXY ".to_vec();
        while !line.ends_with(b"\r\n") {
            let mut b = [0u8; 1];
            stream.read_exact(&mut b).await.ok()?;
            line.push(b[0]);
            if line.len() > 107 {
                return None;
            }
        }
        let text = String::from_utf8(line).ok()?;
        let words: Vec<&str> = text.trim_end().split(' ').collect();
        return match words.get(1) {
            Some(&"UNKNOWN") => Some("UNKNOWN".into()),
            Some(&"TCP4" | &"TCP6") if words.len() == 6 => Some(format!("v1 {}", words[2])),
            _ => None,
        };
    }
    stream.read_exact(&mut fixed[6..]).await.ok()?;
    if fixed[..12] != *V2_SIG {
        return None;
    }
    let mut block = vec![0u8; usize::from(u16::from_be_bytes([fixed[14], fixed[15]]))];
    stream.read_exact(&mut block).await.ok()?;
    match (fixed[12], fixed[13]) {
        (0x20, _) => Some("LOCAL".into()),
        (0x21, 0x11) if block.len() >= 12 => {
            let ip = std::net::Ipv4Addr::new(block[0], block[1], block[2], block[3]);
            Some(format!("v2 {ip}"))
        }
        (0x21, 0x21) if block.len() >= 36 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&block[..16]);
            Some(format!("v2 {}", std::net::Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

/// An origin every connection of which must start with a PROXY protocol header: it records
/// each connection's header and answers (uncacheable) with what the header said.
async fn proxy_reading_origin() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use http_body_util::Full;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let s = s.clone();
            tokio::spawn(async move {
                let said = read_proxy_header(&mut stream)
                    .await
                    .unwrap_or_else(|| "NO HEADER".into());
                s.lock().unwrap().push(said.clone());
                let service = hyper::service::service_fn(move |_req| {
                    let said = said.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            http::Response::builder()
                                .header("cache-control", "no-store")
                                .body(Full::new(bytes::Bytes::from(said)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, seen)
}

/// Two requests on one keep-alive client connection: two backend connections, each
/// starting with a header that names the client (here the client a PROXY header on the
/// listener named); probes send `LOCAL` / `UNKNOWN`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_proxy_protocol_names_the_client_on_a_connection_of_its_own() {
    use shellac::config::{ProbeConfig, ProbeRef, ProxyVersion};
    let (origin, seen) = proxy_reading_origin().await;
    let probe = ProbeConfig {
        name: String::new(),
        url: Some("/health".into()),
        request: None,
        expected_status: 200,
        interval: Dur(Duration::from_millis(100)),
        timeout: Dur(Duration::from_millis(1000)),
        window: 3,
        threshold: 1,
        initial: Some(3),
    };
    let p = probe.clone();
    let shellac = Shellac::start(origin, move |c| {
        behind_balancer(c, "127.0.0.1");
        c.backends[0].proxy_protocol = Some(ProxyVersion::V2);
        c.backends[0].probe = Some(ProbeRef::Inline(p));
    })
    .await;
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"PROXY TCP4 203.0.113.9 127.0.0.1 40000 80\r\n")
        .await
        .unwrap();
    for path in ["/one", "/two"] {
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t.example\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let resp = read_responses(&mut s, 1).await;
        assert!(resp[0].ends_with("v2 203.0.113.9"), "{}", resp[0]);
    }
    let relayed = |seen: &std::sync::Mutex<Vec<String>>| {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|h| *h != "LOCAL")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(relayed(&seen), ["v2 203.0.113.9", "v2 203.0.113.9"]);
    assert!(
        eventually(Duration::from_secs(10), || async {
            seen.lock().unwrap().iter().any(|h| h == "LOCAL")
        })
        .await,
        "a probe sends a LOCAL header"
    );
    drop(s);
    shellac.stop().await;

    // v1, from a client connected directly; its probe says UNKNOWN.
    seen.lock().unwrap().clear();
    let shellac = Shellac::start(origin, move |c| {
        c.backends[0].proxy_protocol = Some(ProxyVersion::V1);
        c.backends[0].probe = Some(ProbeRef::Inline(probe));
    })
    .await;
    let resp = get(shellac.addr, "/three").await;
    assert_eq!(&resp.body[..], b"v1 127.0.0.1");
    assert!(
        eventually(Duration::from_secs(10), || async {
            seen.lock().unwrap().iter().any(|h| h == "UNKNOWN")
        })
        .await,
        "a probe sends an UNKNOWN header"
    );
    assert!(!seen.lock().unwrap().iter().any(|h| h == "NO HEADER"));
    shellac.stop().await;
}
