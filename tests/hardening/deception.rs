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
            b"HTTP/1.1 200 OK\r\ncontent-type: text/css\r\ncontent-length: 4\r\n\r\nbody"
                .to_vec()
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

/// The seeds' rule: static-looking URLs cached for an hour whatever the origin says
/// (`override_origin`), by path; and a `url` rule for `.js` anywhere in path + query.
const FORCING_RULES: &str = "[[rule]]\nname = \"static\"\npath = '\\.(css|js|png)$'\nttl = \"1h\"\noverride_origin = true\n\n\
    [[rule]]\nname = \"static-url\"\nurl = '\\.js$'\nttl = \"1h\"\noverride_origin = true\n\n\
    [[backend]]\nhost = \"a\"\n";

/// An origin like PHP with path info: `/account.php` answers the private account page
/// whatever follows it (`/x.css`, `;x.css`, `%2Fx.css`, `?x.js`) — as `text/html`, and without
/// marking it private (the worst case). Real assets are served with their own types.
async fn php_origin() -> RawOrigin {
    RawOrigin::start(|req| {
        let text = String::from_utf8_lossy(req);
        let target = text.split(' ').nth(1).unwrap_or("");
        let (ctype, body): (&str, &str) = if target.starts_with("/account.php") {
            ("text/html; charset=UTF-8", "<h1>alice's account</h1>")
        } else if target.ends_with(".css") {
            ("text/css", "body{}")
        } else if target.ends_with(".png") {
            ("application/octet-stream", "PNG")
        } else {
            ("application/javascript", "js()")
        };
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncache-control: no-store\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    })
    .await
}

/// Issue 23, web cache deception: a rule that forces caching by extension never stores a
/// response whose Content-Type does not fit the extension the URL claims (cache deception
/// armor, on by default) — path info, `;` parameters, an encoded `%2F`, `.css?`, and a `url`
/// rule's `?x.js`. Real assets (a stylesheet, a PNG sent as octet-stream) are still forced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_deception_armor_refuses_what_the_extension_does_not_promise() {
    let origin = php_origin().await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.rules = Config::parse(FORCING_RULES, "rules.toml")
            .expect("rules")
            .rules;
    })
    .await;
    let bench = Bench { shellac, origin };
    let req = |t: &str| format!("GET {t} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let mut v = Vec::new();
    for (name, target) in [
        ("path info", "/account.php/x.css"),
        ("path parameter", "/account.php;x.css"),
        ("encoded slash", "/account.php%2Fx.css"),
        ("empty query", "/account.php/x.css?"),
        ("png suffix", "/account.php/logo.png"),
        ("url rule", "/account.php?x.js"),
    ] {
        for i in 1..=2 {
            v.push(Vector::new(format!("{name} {i}"), req(target)).expect(&[200], 1));
        }
    }
    v.push(Vector::new("stylesheet 1", req("/site/a.css")).expect(&[200], 1));
    v.push(Vector::new("stylesheet 2", req("/site/a.css")).expect(&[200], 0));
    v.push(Vector::new("octet-stream png 1", req("/img/logo.png")).expect(&[200], 1));
    v.push(Vector::new("octet-stream png 2", req("/img/logo.png")).expect(&[200], 0));
    v.push(Vector::new("script by url 1", req("/app?v=1.js")).expect(&[200], 1));
    v.push(Vector::new("script by url 2", req("/app?v=1.js")).expect(&[200], 0));
    bench.run(&v).await;
    assert_eq!(bench.shellac.stat("cache_deception_armor").await, 12);
    let private = get(bench.shellac.addr, "/account.php/x.css").await;
    assert!(
        private.cache_status().contains("detail=no-store"),
        "the origin's word decides: {}",
        private.cache_status()
    );
    bench.stop().await;
}

/// `cache.deception_armor = false` turns the armor off: the rule then stores whatever the
/// origin answered (what operators get from caches without it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_deception_armor_can_be_turned_off() {
    let origin = php_origin().await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.rules = Config::parse(FORCING_RULES, "rules.toml")
            .expect("rules")
            .rules;
        c.cache.deception_armor = false;
    })
    .await;
    let bench = Bench { shellac, origin };
    let req = |t: &str| format!("GET {t} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    bench
        .run(&[
            Vector::new("deceived 1", req("/account.php/x.css")).expect(&[200], 1),
            Vector::new("deceived 2", req("/account.php/x.css")).expect(&[200], 0),
        ])
        .await;
    assert_eq!(bench.shellac.stat("cache_deception_armor").await, 0);
    bench.stop().await;
}
