//! Configurations as operators write them, end to end: a 4.x and a 2.1 file, synthetic pages,
//! purges and bans, Drupal-style cookie handling and the WordPress guide's VCL.

use crate::common;
use crate::wait_health;
use common::vcl::start_vcl;
use common::{Origin, Reply, get, get_with, request};

#[tokio::test]
async fn a_4x_vcl_edits_requests_and_responses_and_caches() {
    let origin = Origin::start(|seen| {
        Reply::ok(&format!("hello {}", seen.path))
            .cc("max-age=60")
            .header(
                "x-saw-foo",
                seen.headers
                    .get("x-foo")
                    .map_or("", |v| v.to_str().unwrap()),
            )
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    set req.http.x-foo = "bar";
    if (req.url ~ "^/nocache") { return (pass); }
}
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
    unset resp.http.x-saw-foo;
    set resp.http.x-restarts = req.restarts;
}
"#;
    let shellac = start_vcl("basic", vcl, &[origin.addr]).await;
    let r = get(shellac.addr, "/a").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello /a");
    assert_eq!(r.header("x-cache"), Some("MISS"));
    assert_eq!(r.header("x-saw-foo"), None);
    assert_eq!(r.header("x-restarts"), Some("0"));
    assert_eq!(origin.last().headers.get("x-foo").unwrap(), "bar");
    let r = get(shellac.addr, "/a").await;
    assert_eq!(r.header("x-cache"), Some("HIT"), "{:?}", r.headers);
    assert_eq!(origin.count(), 1);
    get(shellac.addr, "/nocache").await;
    get(shellac.addr, "/nocache").await;
    assert_eq!(origin.count_path("/nocache"), 2);
    // The built-in VCL passes requests with cookies.
    get_with(shellac.addr, "/c", &[("cookie", "a=1")]).await;
    get_with(shellac.addr, "/c", &[("cookie", "a=1")]).await;
    assert_eq!(origin.count_path("/c"), 2);
    // And POST.
    request(shellac.addr, "POST", "/a", &[], b"x").await;
    assert_eq!(origin.count_path("/a"), 2);
    shellac.stop().await;
}

/// Varnish 2.0-era operators: two backends with probes behind a random director, and a
/// failed response (any status but 200/302) restarted on the other backend.
#[tokio::test]
async fn a_21_vcl_restarts_a_failed_response_on_the_next_backend() {
    let bad = Origin::start(|_| Reply::ok("broken").status(503)).await;
    let good = Origin::start(|_| Reply::ok("good").cc("max-age=60")).await;
    let vcl = r#"
backend bad { ${origin0} }
backend good { ${origin1} }
director pool round-robin {
    { .backend = bad; }
    { .backend = good; }
}
sub vcl_recv {
    if (req.restarts == 0) {
        set req.backend = bad;
    } else {
        set req.backend = pool;
    }
    set req.http.X-Try = req.restarts;
    lookup;
}
sub vcl_fetch {
    if (beresp.status != 200 && beresp.status != 302) {
        restart;
    }
    set beresp.http.X-Backend = beresp.backend.name;
}
sub vcl_deliver {
    set resp.http.X-Restarts = req.restarts;
}
"#;
    let shellac = start_vcl("restarts", vcl, &[bad.addr, good.addr]).await;
    let r = get(shellac.addr, "/page").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "good");
    assert!(bad.count() >= 1);
    assert_eq!(r.header("x-backend"), Some("good"));
    let restarts: u32 = r.header("x-restarts").unwrap().parse().unwrap();
    assert!((1..=4).contains(&restarts), "{restarts}");
    // The second request is a hit: the good answer was stored.
    let r = get(shellac.addr, "/page").await;
    assert_eq!(r.text(), "good");
    assert_eq!(good.count_path("/page"), 1);
    shellac.stop().await;
}

/// `error` / `synth` answers with the VCL's own page; the built-in page otherwise.
#[tokio::test]
async fn synthetic_responses_in_both_dialects() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let v4 = r#"vcl 4.0;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/teapot") { return (synth(418, "I am a teapot")); }
    if (req.url == "/plain") { return (synth(404)); }
}
sub vcl_synth {
    if (resp.status == 418) {
        set resp.http.Content-Type = "text/plain";
        synthetic("short and stout " + req.url);
        return (deliver);
    }
}
"#;
    let shellac = start_vcl("synth4", v4, &[origin.addr]).await;
    let r = get(shellac.addr, "/teapot").await;
    assert_eq!(r.status, 418);
    assert_eq!(r.text(), "short and stout /teapot");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let r = get(shellac.addr, "/plain").await;
    assert_eq!(r.status, 404);
    assert!(
        r.text().contains("<h1>Error 404 Not Found</h1>"),
        "{}",
        r.text()
    );
    assert_eq!(origin.count(), 0);
    shellac.stop().await;

    let v2 = r#"
backend b { ${origin0} }
acl office { "10.0.0.0"/8; }
sub vcl_recv {
    if (req.url ~ "^/admin" && !client.ip ~ office) {
        error 403 "Forbidden";
    }
}
sub vcl_error {
    set obj.http.Content-Type = "text/plain";
    synthetic "Go away (" obj.status ")";
    deliver;
}
"#;
    let shellac = start_vcl("synth2", v2, &[origin.addr]).await;
    let r = get(shellac.addr, "/admin/x").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.text(), "Go away (403)");
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}

/// Purging: 4.x `return (purge)` from an ACL, 2.x `set obj.ttl = 0s` in vcl_hit, and
/// `ban()`.
#[tokio::test]
async fn purge_and_ban_from_vcl() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=300")).await;
    let v4 = r#"vcl 4.1;
backend b { ${origin0} }
acl purgers { "127.0.0.1"; }
sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) { return (synth(405)); }
        return (purge);
    }
    if (req.method == "BAN") {
        ban("req.url ~ " + req.http.x-ban);
        return (synth(200, "Banned"));
    }
}
"#;
    let shellac = start_vcl("purge4", v4, &[origin.addr]).await;
    get(shellac.addr, "/p").await;
    get(shellac.addr, "/p").await;
    assert_eq!(origin.count_path("/p"), 1);
    let r = request(shellac.addr, "PURGE", "/p", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    get(shellac.addr, "/p").await;
    assert_eq!(origin.count_path("/p"), 2, "purged");
    get(shellac.addr, "/news/1").await;
    get(shellac.addr, "/news/2").await;
    let r = request(shellac.addr, "BAN", "/", &[("x-ban", "^/news/")], b"").await;
    assert_eq!(r.status, 200);
    get(shellac.addr, "/news/1").await;
    get(shellac.addr, "/p").await;
    assert_eq!(origin.count_path("/news/1"), 2, "banned");
    assert_eq!(origin.count_path("/p"), 2, "not banned");
    shellac.stop().await;

    let v2 = r#"
backend b { ${origin0} }
sub vcl_recv {
    if (req.request == "PURGE") { lookup; }
}
sub vcl_hit {
    if (req.request == "PURGE") {
        set obj.ttl = 0s;
        error 200 "Purged.";
    }
}
sub vcl_miss {
    if (req.request == "PURGE") { error 404 "Not in cache."; }
}
"#;
    let shellac = start_vcl("purge2", v2, &[origin.addr]).await;
    get(shellac.addr, "/q").await;
    let r = request(shellac.addr, "PURGE", "/q", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    get(shellac.addr, "/q").await;
    assert_eq!(origin.count_path("/q"), 2);
    let r = request(shellac.addr, "PURGE", "/never", &[], b"").await;
    assert_eq!(r.status, 404);
    shellac.stop().await;
}

/// Drupal-style cookies: analytics cookies stripped, pages with a session cookie passed,
/// the rest cached; and a TTL override for static files whatever the origin says.
#[tokio::test]
async fn drupal_style_cookie_handling() {
    let origin = Origin::start(|seen| {
        let reply = Reply::ok(&format!(
            "{} cookie={}",
            seen.path,
            seen.headers
                .get("cookie")
                .map_or("-", |v| v.to_str().unwrap())
        ));
        if seen.path.ends_with(".css") {
            reply.header("expires", "Thu, 01 Jan 1970 00:00:00 GMT")
        } else {
            reply.cc("max-age=60")
        }
    })
    .await;
    let vcl = r#"vcl 4.1;
import std;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url ~ "\.(css|js|png)$") {
        unset req.http.Cookie;
        return (hash);
    }
    if (req.http.Cookie) {
        set req.http.Cookie = ";" + req.http.Cookie;
        set req.http.Cookie = regsuball(req.http.Cookie, "; +", ";");
        set req.http.Cookie = regsuball(req.http.Cookie, ";(SESS[a-z0-9]+|NO_CACHE)=", "; \1=");
        set req.http.Cookie = regsuball(req.http.Cookie, ";[^ ][^;]*", "");
        set req.http.Cookie = regsuball(req.http.Cookie, "^[; ]+|[; ]+$", "");
        if (req.http.Cookie == "") {
            unset req.http.Cookie;
        } else {
            return (pass);
        }
    }
}
sub vcl_backend_response {
    if (bereq.url ~ "\.(css|js|png)$") {
        set beresp.ttl = 1h;
        set beresp.uncacheable = false;
        return (deliver);
    }
}
"#;
    let shellac = start_vcl("drupal", vcl, &[origin.addr]).await;
    let r = get_with(
        shellac.addr,
        "/node/1",
        &[("cookie", "_ga=GA1.2; has_js=1")],
    )
    .await;
    assert_eq!(r.text(), "/node/1 cookie=-", "analytics cookies stripped");
    get_with(shellac.addr, "/node/1", &[("cookie", "_ga=other")]).await;
    assert_eq!(origin.count_path("/node/1"), 1, "cached without cookies");
    let r = get_with(
        shellac.addr,
        "/node/1",
        &[("cookie", "_ga=x; SESSabc123=s1")],
    )
    .await;
    assert_eq!(
        r.text(),
        "/node/1 cookie=SESSabc123=s1",
        "session cookie kept: passed"
    );
    assert_eq!(origin.count_path("/node/1"), 2);
    get(shellac.addr, "/site.css").await;
    get_with(shellac.addr, "/site.css", &[("cookie", "SESSabc=1")]).await;
    assert_eq!(
        origin.count_path("/site.css"),
        1,
        "1h whatever the origin said"
    );
    shellac.stop().await;
}

/// The 4.x WordPress-guide configuration (tests/vcl/wordpress-4.vcl) with its backends
/// pointed at two origins: logged-in users and wp-admin passed, cookies of anonymous
/// visitors stripped, static files cached, PURGE from the ACL, BAN by URL and host.
#[tokio::test]
async fn the_wordpress_guide_configuration() {
    let handler = |seen: &common::Seen| {
        let reply = Reply::ok(&format!(
            "{} cookie={}",
            seen.path,
            seen.headers
                .get("cookie")
                .map_or("-", |v| v.to_str().unwrap())
        ));
        if seen.path == "/healthcheck.php" {
            return reply;
        }
        reply.cc("max-age=300")
    };
    let a = Origin::start(handler).await;
    let b = Origin::start(handler).await;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vcl/wordpress-4.vcl"
    ))
    .unwrap()
    .replace(".host = \"10.0.0.11\"; .port = \"8080\";", "${origin0}")
    .replace(".host = \"10.0.0.12\"; .port = \"8080\";", "${origin1}");
    let shellac = start_vcl("wordpress", &text, &[a.addr, b.addr]).await;
    wait_health(&shellac, "web1", true).await;
    wait_health(&shellac, "web2", true).await;
    let total = |path: &str| a.count_path(path) + b.count_path(path);
    // Anonymous visitors with analytics cookies share one cached page, without the cookies.
    let r = get_with(
        shellac.addr,
        "/hello-world/",
        &[("cookie", "_ga=1; has_js=1")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "/hello-world/ cookie=-");
    get(shellac.addr, "/hello-world/").await;
    assert_eq!(total("/hello-world/"), 1);
    // Logged-in users and the admin are passed, cookies and all.
    let r = get_with(
        shellac.addr,
        "/hello-world/",
        &[("cookie", "wordpress_logged_in_abc=u1")],
    )
    .await;
    assert_eq!(r.text(), "/hello-world/ cookie=wordpress_logged_in_abc=u1");
    get(shellac.addr, "/wp-admin/").await;
    get(shellac.addr, "/wp-admin/").await;
    assert_eq!(total("/wp-admin/"), 2);
    // PURGE from localhost (in the ACL).
    let r = request(shellac.addr, "PURGE", "/hello-world/", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    get(shellac.addr, "/hello-world/").await;
    assert_eq!(total("/hello-world/"), 3);
    shellac.stop().await;
}
