//! Request fields and addresses under VCL, end to end: hop-by-hop fields and those the
//! client's `Connection` names, `.host_header`, `server.ip` and `local.ip`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common;
use common::vcl::start_vcl;
use common::{Origin, Reply, get, get_with, raw};

/// Hop-by-hop fields are each connection's own (varnishtest b00080): vcl_recv sees the
/// client's Keep-Alive, vcl_backend_fetch does not; vcl_backend_response sees the backend's,
/// vcl_deliver and the client do not.
#[tokio::test]
async fn hop_by_hop_fields_stay_on_their_connection() {
    let origin =
        Origin::start(|seen| Reply::ok(&seen.path).header("keep-alive", "timeout=5")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { set req.http.req-keep-alive = !(!req.http.Keep-Alive); }
sub vcl_backend_fetch { set bereq.http.bereq-keep-alive = !(!bereq.http.Keep-Alive); }
sub vcl_backend_response { set beresp.http.beresp-keep-alive = !(!beresp.http.Keep-Alive); }
sub vcl_deliver { set resp.http.resp-keep-alive = !(!resp.http.Keep-Alive); }
"#;
    let shellac = start_vcl("hop-by-hop", vcl, &[origin.addr]).await;
    let r = get_with(shellac.addr, "/", &[("keep-alive", "1")]).await;
    let seen = origin.last();
    assert_eq!(seen.headers.get("req-keep-alive").unwrap(), "true");
    assert_eq!(seen.headers.get("bereq-keep-alive").unwrap(), "false");
    assert!(seen.headers.get("keep-alive").is_none());
    assert_eq!(r.header("beresp-keep-alive"), Some("true"));
    assert_eq!(r.header("resp-keep-alive"), Some("false"));
    assert_eq!(r.header("keep-alive"), None);
    shellac.stop().await;
}

/// Regression (issue 21, varnishtest c00016): the fields the client's `Connection` named
/// are taken when the request arrives, so one vcl_recv sets under such a name reaches the
/// backend; a 4.x header set from an unset one is set, empty (2.x: left unset).
#[tokio::test]
async fn connection_named_fields_are_those_the_client_sent() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { set req.http.FromVCL = "123"; return (pass); }
sub vcl_backend_fetch { set bereq.http.baa = bereq.http.baax; }
"#;
    let shellac = start_vcl("connection-named", vcl, &[origin.addr]).await;
    let r = get_with(
        shellac.addr,
        "/",
        &[
            ("foo", "1"),
            ("baax", "2"),
            ("connection", "FromVCL, foo, baax"),
        ],
    )
    .await;
    assert_eq!(r.status, 200);
    let seen = origin.last();
    assert_eq!(seen.headers.get("fromvcl").unwrap(), "123");
    assert!(seen.headers.get("foo").is_none());
    assert!(seen.headers.get("baax").is_none());
    assert_eq!(seen.headers.get("baa").unwrap(), "");
    shellac.stop().await;

    let vcl = r#"
backend b { ${origin0} }
sub vcl_recv { set req.http.baa = req.http.baax; return (pass); }
"#;
    let shellac = start_vcl("connection-named-2x", vcl, &[origin.addr]).await;
    get_with(shellac.addr, "/", &[("host", "a")]).await;
    assert!(origin.last().headers.get("baa").is_none(), "2.x: unset");
    shellac.stop().await;
}

/// `.host_header` is the Host of a backend request made from a request without one
/// (HTTP/1.0); without it a VCL backend sends its `.host`, as Varnish does.
#[tokio::test]
async fn host_header_fills_in_a_missing_host() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let vcl = r#"vcl 4.1;
backend named { ${origin0} .host_header = "FOObar"; }
backend plain { ${origin0} }
sub vcl_recv {
    if (req.url == "/plain") { set req.backend_hint = plain; } else { set req.backend_hint = named; }
    return (pass);
}
"#;
    let shellac = start_vcl("host-header", vcl, &[origin.addr]).await;
    raw(shellac.addr, b"GET /named HTTP/1.0\r\n\r\n").await;
    assert_eq!(origin.last().headers.get("host").unwrap(), "FOObar");
    raw(shellac.addr, b"GET /plain HTTP/1.0\r\n\r\n").await;
    assert_eq!(origin.last().headers.get("host").unwrap(), "127.0.0.1");
    // A request with its own Host keeps it.
    get_with(shellac.addr, "/named", &[("host", "site.example")]).await;
    assert_eq!(origin.last().headers.get("host").unwrap(), "site.example");
    shellac.stop().await;
}

/// `server.ip` and `local.ip` are the local address of the socket the client connection was
/// accepted on (they were `0.0.0.0:0`): a program routes on the listening port, over
/// HTTP/1.1 on two listeners, HTTP/2 with prior knowledge, and TLS.
#[tokio::test]
async fn server_ip_is_the_address_the_connection_was_accepted_on() {
    use common::tls::{Pki, all_versions, connect, tls_table};
    let origin = Origin::start(|_| Reply::ok("origin")).await;
    let pki = Pki::new("server-ip");
    let cert = pki.leaf("site", &["site.test"]);
    let dir = common::temp_dir("vcl-server-ip");
    let vcl = |ports: [u16; 3]| {
        let text = format!(
            "vcl 4.1;\nimport std;\nbackend b {{ ${{origin0}} }}\n\
             sub vcl_recv {{\n\
               if (std.port(server.ip) == {}) {{ return (synth(200, \"first\")); }}\n\
               if (std.port(local.ip) == {}) {{ return (synth(201, \"second\")); }}\n\
               if (std.port(server.ip) != {}) {{ return (synth(403)); }}\n\
               return (synth(202, \"tls\"));\n\
             }}\n\
             sub vcl_synth {{\n\
               set resp.http.x-server-ip = server.ip;\n\
               set resp.http.x-local-ip = local.ip;\n\
               set resp.http.x-port = std.port(server.ip);\n\
             }}\n",
            ports[0], ports[1], ports[2]
        );
        common::vcl::with_origins(&text, &[origin.addr])
    };
    std::fs::write(dir.join("site.vcl"), vcl([1, 2, 3])).unwrap();
    let toml = format!(
        "[server]\nlisten = [\"127.0.0.1:0\", \"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n\
         [http2]\nh2c = true\n\n[vcl]\nfile = \"site.vcl\"\n\n{}",
        tls_table(&[&cert], "")
    );
    let conf = dir.join("shellac.toml");
    std::fs::write(&conf, toml).unwrap();
    let shellac = common::Shellac::start_reloadable(&conf).await;
    let tls_addr = shellac.tls_addrs()[0];
    let plain: Vec<SocketAddr> = shellac
        .listening()
        .into_iter()
        .filter(|a| *a != tls_addr)
        .collect();
    assert_eq!(plain.len(), 2, "{plain:?}");
    let (a, b) = (plain[0], plain[1]);
    // The program that knows the ports: a reload (connections made from now on).
    std::fs::write(
        dir.join("site.vcl"),
        vcl([a.port(), b.port(), tls_addr.port()]),
    )
    .unwrap();
    let (status, body) = shellac.reload().await;
    assert_eq!(status, 200, "{body}");

    let first = get(a, "/").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-server-ip"), Some("127.0.0.1"));
    assert_eq!(first.header("x-local-ip"), Some("127.0.0.1"));
    assert_eq!(first.header("x-port"), Some(a.port().to_string().as_str()));
    let second = get(b, "/").await;
    assert_eq!(second.status, 201);
    assert_eq!(second.header("x-port"), Some(b.port().to_string().as_str()));

    // A connection that sends nothing at first waits in the parking lot, which keeps no
    // listener: its address is asked of the socket when the program needs it.
    let mut quiet = tokio::net::TcpStream::connect(b).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    quiet
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    quiet.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert!(
        answer.contains(&format!("x-port: {}\r\n", b.port())),
        "{answer}"
    );

    // HTTP/2 with prior knowledge.
    let h2 = common::h2::h2_get(a, "/", &[]).await;
    assert_eq!(h2.status, 200);
    assert_eq!(h2.header("x-local-ip"), Some("127.0.0.1"));
    assert_eq!(h2.header("x-port"), Some(a.port().to_string().as_str()));

    // TLS.
    let client = std::sync::Arc::new(pki.client_config(&all_versions()));
    let stream = connect(tls_addr, &client, "site.test").await.unwrap();
    let mut conn = common::Conn::over(stream).await;
    let tls = conn.send("GET", "/", &[("host", "site.test")], b"").await;
    assert_eq!(tls.status, 202);
    assert_eq!(tls.header("x-server-ip"), Some("127.0.0.1"));
    assert_eq!(
        tls.header("x-port"),
        Some(tls_addr.port().to_string().as_str())
    );

    // HTTP/2 over TLS (ALPN).
    let mut h2_client = pki.client_config(&all_versions());
    h2_client.alpn_protocols = vec![b"h2".to_vec()];
    let stream = connect(tls_addr, &std::sync::Arc::new(h2_client), "site.test")
        .await
        .unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("https://site.test/")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.status(), 202);
    assert_eq!(
        resp.headers().get("x-port").and_then(|v| v.to_str().ok()),
        Some(tls_addr.port().to_string().as_str())
    );
    shellac.stop().await;
}
