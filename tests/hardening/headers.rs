//! Request line and field syntax (RFC 9112 §3, §5; RFC 9110 §5.5, §7.2): everything hyper
//! would accept leniently is refused before it is parsed.

use super::*;

fn get(fields: &str) -> String {
    with_after(&format!("GET / HTTP/1.1\r\nHost: a\r\n{fields}"), "")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_syntax() {
    let bench = Bench::start().await;
    let v = vec![
        Vector::refused("obs-fold", get("X-A: 1\r\n folded\r\n"), 400),
        Vector::refused("obs-fold tab", get("X-A: 1\r\n\tfolded\r\n"), 400),
        Vector::refused("space before colon", get("X-A : 1\r\n"), 400),
        Vector::refused("tab before colon", get("X-A\t: 1\r\n"), 400),
        Vector::refused("empty name", get(": 1\r\n"), 400),
        Vector::refused("no colon", get("X-A 1\r\n"), 400),
        Vector::refused("NUL in value", get("X-A: a\0b\r\n"), 400),
        Vector::refused("bare CR in value", get("X-A: a\rb\r\n"), 400),
        Vector::refused("DEL in value", get("X-A: a\u{7f}b\r\n"), 400),
        Vector::refused("vertical tab in value", get("X-A: a\u{b}b\r\n"), 400),
        Vector::refused("escape in value", get("X-A: a\u{1b}b\r\n"), 400),
        Vector::refused("NUL in name", get("X\0A: 1\r\n"), 400),
        Vector::refused("quote in name", get("X\"A: 1\r\n"), 400),
        Vector::refused("bare LF line ends", "GET / HTTP/1.1\nHost: a\n\n", 400),
        Vector::refused("bare LF one field", get("X-A: 1\n"), 400),
        Vector::refused("LF before head", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ];
    bench.run(&v).await;
    assert_eq!(bench.origin.count(), 0);
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_line_and_host() {
    let bench = Bench::start().await;
    let line = |l: &str| with_after(&format!("{l}\r\nHost: a\r\n"), "");
    let v = vec![
        Vector::refused("method with (", line("GE(T / HTTP/1.1"), 400),
        Vector::refused("leading space", line(" GET / HTTP/1.1"), 400),
        Vector::refused("double space", line("GET  / HTTP/1.1"), 400),
        Vector::refused("tab separator", line("GET\t/ HTTP/1.1"), 400),
        Vector::refused("trailing space", line("GET / HTTP/1.1 "), 400),
        Vector::refused("lower-case version", line("GET / http/1.1"), 400),
        Vector::refused("HTTP/2.0 over HTTP/1", line("GET / HTTP/2.0"), 505),
        Vector::refused("HTTP/0.5", line("GET / HTTP/0.5"), 505),
        Vector::refused("HTTP/0.9 with a version", line("GET / HTTP/0.9"), 505),
        // RFC 9112 §2.3: `"HTTP" "/" DIGIT "." DIGIT`, nothing else (nginx reads these).
        Vector::refused("two-digit minor", line("GET / HTTP/1.10"), 400),
        Vector::refused("leading zero major", line("GET / HTTP/01.1"), 400),
        Vector::new(
            "HTTP/1.9 read as HTTP/1.1",
            "GET /nine HTTP/1.9\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200], 1),
        // RFC 9110 §2.5: a later minor version is read as the highest one implemented.
        Vector::new(
            "HTTP/1.2 read as HTTP/1.1",
            "GET / HTTP/1.2\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200], 1),
        Vector::refused("HTTP/0.9 style", "GET /\r\n\r\n", 400),
        Vector::refused("fragment", line("GET /a#b HTTP/1.1"), 400),
        Vector::refused("backslash", line("GET /a\\..\\b HTTP/1.1"), 400),
        Vector::refused("bad escape", line("GET /%zz HTTP/1.1"), 400),
        Vector::refused("raw UTF-8", line("GET /caf\u{e9} HTTP/1.1"), 400),
        Vector::refused("relative target", line("GET a/b HTTP/1.1"), 400),
        Vector::refused("asterisk for GET", line("GET * HTTP/1.1"), 400),
        Vector::refused("other scheme", line("GET ftp://a/ HTTP/1.1"), 400),
        Vector::refused("userinfo", line("GET http://user@a/ HTTP/1.1"), 400),
        Vector::refused("empty authority", line("GET http:///x HTTP/1.1"), 400),
        Vector::refused(
            "missing Host",
            with_after("GET / HTTP/1.1\r\nX: 1\r\n", ""),
            400,
        ),
        Vector::refused("duplicate Host", get("Host: b\r\n"), 400),
        Vector::refused("duplicate Host same", get("Host: a\r\n"), 400),
        Vector::refused(
            "Host with space",
            with_after("GET / HTTP/1.1\r\nHost: a b\r\n", ""),
            400,
        ),
        Vector::refused(
            "Host with userinfo",
            with_after("GET / HTTP/1.1\r\nHost: u@a\r\n", ""),
            400,
        ),
        Vector::refused(
            "Host with path",
            with_after("GET / HTTP/1.1\r\nHost: a/b\r\n", ""),
            400,
        ),
        Vector::refused(
            "empty Host",
            with_after("GET / HTTP/1.1\r\nHost:\r\n", ""),
            400,
        ),
        Vector::refused(
            "CONNECT",
            "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
            405,
        ),
        // Accepted forms.
        Vector::new("HTTP/1.0 without Host", "GET /ten HTTP/1.0\r\n\r\n").expect(&[200], 1),
        Vector::new(
            "absolute-form",
            "GET http://b.example/abs HTTP/1.1\r\nHost: ignored\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200], 1),
        Vector::new(
            "OPTIONS *",
            "OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200], 1),
        Vector::new(
            "empty lines before the request line",
            "\r\n\r\nGET /lines HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200], 1),
    ];
    bench.run(&v).await;
    let seen: Vec<String> = (0..bench.origin.count())
        .map(|i| bench.origin.request(i))
        .collect();
    let abs = seen
        .iter()
        .find(|r| r.contains("/abs"))
        .expect("absolute-form forwarded");
    assert!(
        abs.starts_with("GET /abs HTTP/1.1\r\n"),
        "origin-form toward the backend: {abs}"
    );
    assert!(
        abs.to_ascii_lowercase().contains("host: b.example\r\n"),
        "{abs}"
    );
    let stats = bench.shellac.stats().await;
    assert_eq!(stats["client_reject_host"], 7);
    bench.stop().await;
}
