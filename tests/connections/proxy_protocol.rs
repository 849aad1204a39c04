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

/// What VCL reads of a connection behind a PROXY header, as Varnish's trunk/o00000 and
/// o00001 check it: `client.ip` the header's source, `server.ip` its destination,
/// `remote.ip` and `local.ip` the TCP connection's own ends (the balancer and Shellac's
/// listener) — also for the next request of a connection released to the parking lot in
/// between. A `LOCAL` header (and v1 `UNKNOWN`) leaves all four the connection's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_addresses_in_vcl_client_server_remote_and_local() {
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let vcl = r#"vcl 4.1;
import std;
backend default { ${origin0} }
acl fwd_server { "5.6.7.8"; "8182:8384:8586::8d8e:8f80"; }
sub vcl_deliver {
    set resp.http.x-ci = client.ip + " " + std.port(client.ip);
    set resp.http.x-si = server.ip + " " + std.port(server.ip);
    set resp.http.x-ri = remote.ip;
    set resp.http.x-li = local.ip + " " + std.port(local.ip);
    set resp.http.x-fs = (server.ip ~ fwd_server);
}
"#;
    let shellac = common::vcl::start_vcl_with("pp-addrs", vcl, &[origin.addr], |c| {
        behind_balancer(c, "127.0.0.1");
        c.server.idle_release = Dur(Duration::from_millis(50));
    })
    .await;
    let wait = Duration::from_secs(5);
    let port = shellac.addr.port();
    let fields = |text: &str| -> Vec<String> {
        let lower = text.to_ascii_lowercase();
        ["x-ci", "x-si", "x-ri", "x-li", "x-fs"]
            .iter()
            .map(|f| {
                lower
                    .split("\r\n")
                    .find_map(|l| l.strip_prefix(&format!("{f}: ")))
                    .unwrap_or_else(|| panic!("no {f} in {text}"))
                    .to_string()
            })
            .collect()
    };
    let local = format!("127.0.0.1 {port}");
    // v1, IPv4.
    let e = exchange(
        shellac.addr,
        &[
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 1234 5678\r\n"[..],
            &get_close("/v1"),
        ]
        .concat(),
        wait,
    )
    .await;
    assert_eq!(
        fields(&e.text),
        ["1.2.3.4 1234", "5.6.7.8 5678", "127.0.0.1", &local, "true"],
        "{}",
        e.text
    );
    // v2, IPv6, then a second request on the connection after it was parked.
    let mut v6 = V2_SIG.to_vec();
    v6.extend_from_slice(&[0x21, 0x21, 0, 36]);
    v6.extend_from_slice(
        &"102:304:506::d0e:f10"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v6.extend_from_slice(
        &"8182:8384:8586::8d8e:8f80"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v6.extend_from_slice(&[0x09, 0x0a, 0x0b, 0x0c]);
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(&[v6, b"GET /v2 HTTP/1.1\r\nHost: t.example\r\n\r\n".to_vec()].concat())
        .await
        .unwrap();
    let want = [
        "102:304:506::d0e:f10 2314",
        "8182:8384:8586::8d8e:8f80 2828",
        "127.0.0.1",
        &local,
        "true",
    ];
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(wait, s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let first = String::from_utf8_lossy(&buf[..n]).to_string();
    assert_eq!(fields(&first), want, "{first}");
    until_stats(&shellac, "the connection released", |s| {
        s["client_idle_released"] >= 1
    })
    .await;
    s.write_all(&get_close("/v2-again")).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, s.read_to_end(&mut out)).await;
    let again = String::from_utf8_lossy(&out).to_string();
    assert_eq!(fields(&again), want, "{again}");
    // LOCAL: the connection's own addresses everywhere.
    let e = exchange(
        shellac.addr,
        &[[V2_SIG, &[0x20, 0x00, 0, 0]].concat(), get_close("/local")].concat(),
        wait,
    )
    .await;
    let f = fields(&e.text);
    assert!(f[0].starts_with("127.0.0.1 "), "{}", e.text);
    assert_eq!(
        &f[1..],
        [&local[..], "127.0.0.1", &local, "false"],
        "{}",
        e.text
    );
    assert_eq!(shellac.stat("client_proxy").await, 3);
    assert_eq!(shellac.stat("client_proxy_malformed").await, 0);
    shellac.stop().await;
}

/// A v2 header's TLVs are checked (trunk/o00005.vtc's cases): a CRC32C checksum that does
/// not match, bytes after the last whole TLV, and a TLV longer than what is left close the
/// connection and count it malformed; the same header with the right checksum is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_v2_tlvs_are_checked_and_a_bad_checksum_closes() {
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let shellac = start(&origin, |c| behind_balancer(c, "127.0.0.1")).await;
    let wait = Duration::from_secs(5);
    let header = |len: u8, first: u8, crc: [u8; 4], tail: &[u8]| -> Vec<u8> {
        let mut h = V2_SIG.to_vec();
        h.extend_from_slice(&[0x21, 0x11, 0, len]);
        h.extend_from_slice(&[217, 70, 181, 33, 95, 142, 168, 34, 0xed, 0x96, 0x01, 0xbb]);
        h.extend_from_slice(&[first, 0, 4]);
        h.extend_from_slice(&crc);
        h.extend_from_slice(b"\x01\x00\x02h2\x02\x00\x0ahocdet.net");
        h.extend_from_slice(b"\x20\x00\x3d\x01\x00\x00\x00\x00");
        h.extend_from_slice(b"\x21\x00\x07TLSv1.3\x25\x00\x05EC256\x24\x00\x0aRSA-SHA256");
        h.extend_from_slice(b"\x23\x00\x16AEAD-AES128-GCM-SHA256");
        h.extend_from_slice(tail);
        h
    };
    let good = header(0x65, 0x03, [0x95, 0x03, 0xee, 0x75], b"");
    for (bytes, what) in [
        (
            header(0x65, 0x03, [0x95, 0x03, 0xee, 0x74], b""),
            "bad CRC32C",
        ),
        (
            header(0x67, 0xff, [0x95, 0x03, 0xee, 0x74], b"\xff\xff"),
            "dribble bytes",
        ),
        (
            header(0x60, 0xff, [0x95, 0x03, 0xee, 0x74], b""),
            "TLV past the end",
        ),
    ] {
        let e = exchange(shellac.addr, &[bytes, get_close("/tlv")].concat(), wait).await;
        assert!(e.closed && e.text.is_empty(), "{what}: {}", e.text);
    }
    let e = exchange(shellac.addr, &[good, get_close("/crc-ok")].concat(), wait).await;
    assert_eq!(e.statuses(), vec![200], "{}", e.text);
    assert_eq!(forwarded_for(&origin, "/crc-ok"), "217.70.181.33");
    until_stats(&shellac, "the refusals counted", |s| {
        s["client_proxy_malformed"] == 3 && s["client_proxy"] == 1
    })
    .await;
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

// PROXY protocol to backends (`[[backend]] proxy_protocol`).

/// Reads a PROXY protocol header as an origin behind HAProxy's `accept-proxy` would (the
/// test's own reader, not Shellac's): `"v1 SOURCE-IP > DESTINATION"`, `"v2 SOURCE-IP >
/// DESTINATION"` (the destination's address and port), `"LOCAL"`, `"UNKNOWN"`, or None for
/// anything else.
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
            Some(&"TCP4" | &"TCP6") if words.len() == 6 => {
                let ip: std::net::IpAddr = words[3].parse().ok()?;
                let to = std::net::SocketAddr::new(ip, words[5].parse().ok()?);
                Some(format!("v1 {} > {to}", words[2]))
            }
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
            let to = std::net::Ipv4Addr::new(block[4], block[5], block[6], block[7]);
            let port = u16::from_be_bytes([block[10], block[11]]);
            Some(format!("v2 {ip} > {to}:{port}"))
        }
        (0x21, 0x21) if block.len() >= 36 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&block[..16]);
            let mut b = [0u8; 16];
            b.copy_from_slice(&block[16..32]);
            let to = std::net::SocketAddrV6::new(
                b.into(),
                u16::from_be_bytes([block[34], block[35]]),
                0,
                0,
            );
            Some(format!("v2 {} > {to}", std::net::Ipv6Addr::from(a)))
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
        // The destination is the one the client connected to, as the listener's header
        // said (Varnish's `server.ip`), not the backend's address.
        assert!(
            resp[0].ends_with("v2 203.0.113.9 > 127.0.0.1:80"),
            "{}",
            resp[0]
        );
    }
    let relayed = |seen: &std::sync::Mutex<Vec<String>>| {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|h| *h != "LOCAL")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        relayed(&seen),
        [
            "v2 203.0.113.9 > 127.0.0.1:80",
            "v2 203.0.113.9 > 127.0.0.1:80"
        ]
    );
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
    // Without a header on the listener: the listener's own address.
    assert_eq!(resp.text(), format!("v1 127.0.0.1 > {}", shellac.addr));
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

/// VCL's `.proxy_header = 1` / `2` (Varnish's backend field, trunk/o00002.vtc): each backend
/// connection starts with a header of that version naming the request's client (here the
/// one a PROXY header on the listener named), as `[[backend]] proxy_protocol` does; a value
/// other than 1 or 2, or one beside `.preamble`, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcl_proxy_header_sends_the_header_of_its_version() {
    let (origin, seen) = proxy_reading_origin().await;
    let vcl = format!(
        r#"vcl 4.1;
backend bp1 {{ .host = "127.0.0.1"; .port = "{port}"; .proxy_header = 1; }}
backend bp2 {{ .host = "127.0.0.1"; .port = "{port}"; .proxy_header = 2; }}
sub vcl_recv {{
    if (req.url == "/1") {{ set req.backend_hint = bp1; }} else {{ set req.backend_hint = bp2; }}
    return (pass);
}}
"#,
        port = origin.port()
    );
    let shellac =
        common::vcl::start_vcl_with("pp-vcl", &vcl, &[], |c| behind_balancer(c, "127.0.0.1")).await;
    let wait = Duration::from_secs(5);
    for (path, header, said) in [
        (
            "/1",
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 5678\r\n"[..],
            "v1 1.2.3.4 > 5.6.7.8:5678",
        ),
        (
            "/2",
            &b"PROXY TCP6 1:f::2 5:a::8 2222 5678\r\n"[..],
            "v2 1:f::2 > [5:a::8]:5678",
        ),
    ] {
        let e = exchange(shellac.addr, &[header, &get_close(path)].concat(), wait).await;
        assert_eq!(e.statuses(), vec![200], "{}", e.text);
        assert!(e.text.ends_with(said), "{path}: {}", e.text);
    }
    assert_eq!(
        *seen.lock().unwrap(),
        ["v1 1.2.3.4 > 5.6.7.8:5678", "v2 1:f::2 > [5:a::8]:5678"]
    );
    shellac.stop().await;
    for (field, refusal) in [
        (".proxy_header = 3;", "must be 1 or 2"),
        (
            ".proxy_header = 1; .preamble = :UFJJ:;",
            "'.preamble' and '.proxy_header'",
        ),
    ] {
        let text = format!("vcl 4.1;\nbackend b {{ .host = \"127.0.0.1\"; {field} }}\n");
        let errors = match shellac::vcl::compile_text("t.vcl", &text) {
            Ok(_) => String::new(),
            Err(e) => e.iter().map(|e| format!("{e}\n")).collect(),
        };
        assert!(errors.contains(refusal), "{field}: {errors}");
    }
}
