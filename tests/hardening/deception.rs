//! Cache deception: a path that looks static ("*.css") must not make the cache store what the
//! origin marked private, and rules see the same normalised path the origin routes on.

use super::*;
use shellac::config::Config;

const RULE: &str =
    "[[rule]]\nname = \"static\"\npath = '\\.css$'\nttl = \"1h\"\n\n[[backend]]\nhost = \"a\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_looking_path_does_not_cache_private_answers() {
    let origin = RawOrigin::start(|req| {
        let text = String::from_utf8_lossy(req);
        if text.starts_with("GET /account") {
            // The origin ignores the suffix and serves the account page, marked private.
            b"HTTP/1.1 200 OK\r\ncache-control: private\r\nset-cookie: s=1\r\ncontent-length: 7\r\n\r\nsecret!"
                .to_vec()
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nbody".to_vec()
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.rules = Config::parse(RULE, "rule.toml").expect("rule").rules;
    })
    .await;
    let bench = Bench { shellac, origin };
    let req = |t: &str| format!("GET {t} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let v = vec![
        Vector::new("deception 1", req("/account/x.css")).expect(&[200], 1),
        Vector::new("deception 2", req("/account/x.css")).expect(&[200], 1),
        Vector::new("path parameter 1", req("/account;x.css")).expect(&[200], 1),
        Vector::new("path parameter 2", req("/account;x.css")).expect(&[200], 1),
        // A real stylesheet without freshness: the rule's TTL applies (stored).
        Vector::new("static 1", req("/site/a.css")).expect(&[200], 1),
        Vector::new("static 2", req("/site/a.css")).expect(&[200], 0),
        // The rule sees the normalised path: %61 is `a`, so this is the same stylesheet.
        Vector::new("normalised", req("/site/%61.css")).expect(&[200], 0),
        // `%2E` stays encoded (no `.css` suffix for the rule, nor for the origin).
        Vector::new("escaped dot 1", req("/site/a%2ecss")).expect(&[200], 1),
        Vector::new("escaped dot 2", req("/site/a%2ecss")).expect(&[200], 1),
    ];
    bench.run(&v).await;
    let lines: Vec<String> = (0..bench.origin.count())
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
    assert!(
        lines.contains(&"GET /site/a%2Ecss HTTP/1.1".to_string()),
        "{lines:?}"
    );
    bench.stop().await;
}
