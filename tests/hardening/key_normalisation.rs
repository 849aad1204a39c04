//! What the cache key normalises (and, so that key and origin agree, what the origin then
//! receives), and what it deliberately does not.

use super::*;

fn req(target: &str, host: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equivalent_spellings_share_one_object() {
    let bench = Bench::start().await;
    let v = vec![
        Vector::new("first", req("/~user/a%2fb?q=%41", "Example.COM")).expect(&[200], 1),
        Vector::new("escape case", req("/~user/a%2Fb?q=A", "example.com")).expect(&[200], 0),
        Vector::new(
            "unreserved escaped",
            req("/%7Euser/a%2fb?q=%41", "example.com:80"),
        )
        .expect(&[200], 0),
        Vector::new("empty port", req("/~user/a%2Fb?q=A", "example.com:")).expect(&[200], 0),
        Vector::new(
            "absolute-form",
            req("http://EXAMPLE.com:80/%7euser/a%2Fb?q=A", "x"),
        )
        .expect(&[200], 0),
        // Not equivalent: reserved characters, other ports, dot segments, case of the path.
        Vector::new("slash is not %2F", req("/~user/a/b?q=A", "example.com")).expect(&[200], 1),
        Vector::new("other port", req("/~user/a%2Fb?q=A", "example.com:8080")).expect(&[200], 1),
        Vector::new(
            "dot segment",
            req("/~user/../~user/a%2Fb?q=A", "example.com"),
        )
        .expect(&[200], 1),
        Vector::new("path case", req("/~USER/a%2Fb?q=A", "example.com")).expect(&[200], 1),
        Vector::new("escaped dot stays", req("/%2e%2e/x", "example.com")).expect(&[200], 1),
    ];
    bench.run(&v).await;
    let seen: Vec<String> = (0..bench.origin.count())
        .map(|i| {
            bench
                .origin
                .request(i)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            "GET /~user/a%2Fb?q=A HTTP/1.1",
            "GET /~user/a/b?q=A HTTP/1.1",
            "GET /~user/a%2Fb?q=A HTTP/1.1",
            "GET /~user/../~user/a%2Fb?q=A HTTP/1.1",
            "GET /~USER/a%2Fb?q=A HTTP/1.1",
            "GET /%2E%2E/x HTTP/1.1",
        ],
        "the origin sees the normalised target, dot segments untouched"
    );
    bench.stop().await;
}
