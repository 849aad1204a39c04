//! Issue 29's content codings with the clients it names: an HTTP/2 client (h2c), Python's
//! standard library (`http.client`, `urllib`) and Debian's `curl --compressed` over HTTP/2 and
//! HTTP/1.1 get the one stored gzip object as stored or decoded, by their `Accept-Encoding`,
//! with `Vary: Accept-Encoding` (docs/compression.md).

use super::common::pages::{gunzip, page, page_origin, varies_on_coding};
use super::*;

/// Over HTTP/2 every `Accept-Encoding` shape is served from the one object the first request
/// stored: gzip as stored (weak `ETag`), identity decoded with its length and strong `ETag`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_clients_get_the_stored_gzip_or_its_decoded_identity() {
    let origin = page_origin().await;
    // No br / zstd representations: a client preferring them is served the gzip throughout.
    let shellac = Shellac::start(origin.addr, |c| {
        h2c(c);
        c.compression.encodings = Vec::new();
    })
    .await;
    let mut conn = H2Conn::open(shellac.addr).await;
    for (ae, gzip) in [
        (Some("gzip, deflate, br, zstd"), true),
        (None, false),
        (Some("gzip;q=0, identity"), false),
        (Some("*"), true),
        (Some("br;q=1.0, GZIP;q=0.5"), true),
        (Some("identity"), false),
    ] {
        let fields: Vec<(&str, &str)> = ae.map(|v| ("accept-encoding", v)).into_iter().collect();
        let r = conn.send("GET", "/page", &fields, b"").await;
        assert_eq!(r.status, 200, "{ae:?}");
        assert!(varies_on_coding(&r), "{ae:?}: {:?}", r.headers);
        if gzip {
            assert_eq!(r.header("content-encoding"), Some("gzip"), "{ae:?}");
            assert_eq!(r.header("etag"), Some("W/\"v1\""), "{ae:?}");
            assert_eq!(gunzip(&r.body), page().as_bytes(), "{ae:?}");
        } else {
            assert_eq!(r.header("content-encoding"), None, "{ae:?}");
            assert_eq!(r.header("etag"), Some("\"v1\""), "{ae:?}");
            assert_eq!(r.body, page().as_bytes(), "{ae:?}");
        }
    }
    assert_eq!(origin.count(), 1, "one object served every client");
    assert!(shellac.stat("compress_gunzip").await >= 1);
    shellac.stop().await;
}

/// `curl --compressed` (which sends its own `Accept-Encoding` and decodes) and plain `curl`
/// over h2c and HTTP/1.1: the compressed answer says `content-encoding: gzip`, the plain one
/// has none, and both bodies are the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_compressed_and_plain_over_http2_and_http1() {
    let Some(curl) = tools::require(tools::which("curl"), "curl", "curl") else {
        return;
    };
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let url = format!("http://{}/page", shellac.addr);
    for (protocol, compressed) in [
        ("--http2-prior-knowledge", true),
        ("--http2-prior-knowledge", false),
        ("--http1.1", true),
        ("--http1.1", false),
    ] {
        let dir = TempDir::new("h2-curl-compressed");
        let head = dir.path("head");
        let mut args = vec![protocol, "-s", "-D"];
        let head_arg = head.to_str().expect("UTF-8 temp path");
        args.push(head_arg);
        if compressed {
            args.push("--compressed");
        }
        args.push(&url);
        let out = tokio::process::Command::new(&curl)
            .args(&args)
            .output()
            .await
            .expect("curl runs");
        let what = format!("{protocol} compressed={compressed}");
        assert!(out.status.success(), "{what}: {out:?}");
        let head = std::fs::read_to_string(&head)
            .expect("curl wrote the head")
            .to_ascii_lowercase();
        assert!(head.contains(" 200"), "{what}: {head}");
        assert!(head.contains("vary: accept-encoding"), "{what}: {head}");
        assert_eq!(
            head.contains("content-encoding: gzip"),
            compressed,
            "{what}: {head}"
        );
        assert_eq!(out.stdout, page().as_bytes(), "{what}");
    }
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// Python's standard library as a client: `http.client` with the `Accept-Encoding` shapes
/// scripts send by hand, and `urllib.request` (which sends `Accept-Encoding: identity`), all
/// over HTTP/1.1 and served from the one object the first request stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_clients_get_the_stored_gzip_or_its_decoded_identity() {
    let Some(python) = tools::require(tools::which("python3"), "python3", "python3") else {
        return;
    };
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |c| c.compression.encodings = Vec::new()).await;
    // One line per request: the Accept-Encoding sent ("-" for none), then the status,
    // Content-Encoding, Vary and ETag received, and whether the body decodes to the page.
    let script = r#"
import gzip, http.client, sys, urllib.request
host, port, page = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], 'rb').read()
def line(ae, status, headers, body):
    ce = headers.get('Content-Encoding') or '-'
    plain = gzip.decompress(body) if ce == 'gzip' else body
    print('|'.join([ae, str(status), ce, headers.get('Vary') or '-',
                    headers.get('ETag') or '-', str(plain == page)]))
for ae in ['gzip', 'gzip, deflate', 'deflate, gzip;q=0.5', 'gzip;q=0', 'identity', '*;q=0, gzip', '-']:
    c = http.client.HTTPConnection(host, port, timeout=10)
    # skip_accept_encoding: http.client would otherwise add 'identity' itself.
    c.putrequest('GET', '/page', skip_accept_encoding=True)
    if ae != '-':
        c.putheader('Accept-Encoding', ae)
    c.endheaders()
    r = c.getresponse()
    line(ae, r.status, r.headers, r.read())
    c.close()
r = urllib.request.urlopen('http://%s:%d/page' % (host, port), timeout=10)
line('urllib', r.status, r.headers, r.read())
"#;
    let dir = TempDir::new("python-compression");
    let page_file = dir.path("page");
    std::fs::write(&page_file, page()).expect("write the page");
    let out = tokio::process::Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(shellac.addr.ip().to_string())
        .arg(shellac.addr.port().to_string())
        .arg(&page_file)
        .output()
        .await
        .expect("python3 runs");
    assert!(out.status.success(), "{out:?}");
    let lines = String::from_utf8_lossy(&out.stdout);
    let got: Vec<Vec<&str>> = lines.lines().map(|l| l.split('|').collect()).collect();
    let want_gzip = [true, true, true, false, false, true, false, false];
    assert_eq!(got.len(), want_gzip.len(), "{lines}");
    for (fields, gzip) in got.iter().zip(want_gzip) {
        let what = fields[0];
        assert_eq!(fields[1], "200", "{what}: {lines}");
        assert_eq!(
            fields[2],
            if gzip { "gzip" } else { "-" },
            "{what}: {lines}"
        );
        assert!(
            fields[3].eq_ignore_ascii_case("accept-encoding"),
            "{what}: {lines}"
        );
        assert_eq!(
            fields[4],
            if gzip { "W/\"v1\"" } else { "\"v1\"" },
            "{what}: {lines}"
        );
        assert_eq!(fields[5], "True", "{what}: the body is the page: {lines}");
    }
    assert_eq!(origin.count(), 1, "one object served every client");
    shellac.stop().await;
}
