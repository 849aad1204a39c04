//! The migration guides' worked examples, run. docs/migrating-from-varnish.md's WordPress
//! VCL and the TOML file it gives as the equivalent, each in front of the same scripted origin,
//! must agree on what is cached, passed, purged and stripped — and differ only where the guide
//! says they do (tracking parameters: the VCL removes them from the URL, the TOML file cannot).
//! The nginx and Apache guides' TOML translations must do what the comments beside each line
//! say the original directive did. The blocks are read from the guides themselves
//! (tests/docs.rs checks that they load), so their promises are held to behaviour, not just to
//! syntax.

#[path = "migration_guides/apache_rewrite.rs"]
mod apache_rewrite;
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::vcl::start_vcl;
use common::*;

const GUIDE: &str = include_str!("../docs/migrating-from-varnish.md");

/// The first ```LANG block after `heading` in `guide`.
fn block_of(guide: &str, heading: &str, lang: &str) -> String {
    let start = guide
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?}"));
    let fence = format!("```{lang}\n");
    let open = guide[start..].find(&fence).expect("the block") + start + fence.len();
    let close = guide[open..].find("```").expect("its end") + open;
    guide[open..close].to_string()
}

/// [`block_of`] the Varnish guide.
fn block(heading: &str, lang: &str) -> String {
    block_of(GUIDE, heading, lang)
}

/// Starts Shellac on a guide's TOML file with its listeners on ephemeral ports, no disk tier
/// (its path is the reader's machine's) and every backend pointed at `origin`.
async fn start_toml(name: &str, toml: &str, origin: std::net::SocketAddr) -> Shellac {
    let dir = temp_dir(name);
    let path = dir.join("shellac.toml");
    std::fs::write(&path, toml).unwrap();
    let mut config = shellac::config::Config::load(&path).expect("the guide's TOML loads");
    std::fs::remove_dir_all(&dir).ok();
    config.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
    config.server.admin = Some("127.0.0.1:0".parse().unwrap());
    config.storage.disk = None;
    config.log.access_log = "off".into();
    for backend in &mut config.backends {
        backend.host = origin.ip().to_string();
        backend.port = origin.port();
    }
    let running = shellac::server::start(Arc::new(config))
        .await
        .expect("starts");
    Shellac::from_running(running)
}

/// The TTL the cache gave `path` (requests carry `Host: test.example`).
async fn ttl_of(shellac: &Shellac, path: &str) -> u64 {
    let url = format!("/cache?url={path}&host=test.example");
    let v: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, &url).await.body).expect("JSON");
    v["variants"][0]["copies"][0]["ttl_seconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("{path} not cached: {v}"))
}

const EXAMPLE: &str = "## A worked example: WordPress, VCL 4.1";

/// The origin of a WordPress site: pages that expire at once (as WordPress sends them) and
/// set a cookie, static files without freshness, the admin, the probe's login page.
async fn wordpress() -> Origin {
    Origin::start(|seen| match seen.path.as_str() {
        "/wp-login.php" => Reply::ok("login"),
        "/wp-admin/" => Reply::ok("admin").cc("max-age=60"),
        "/style.css" => Reply::ok("body{}")
            .header("Content-Type", "text/css")
            .header("Set-Cookie", "visited=1"),
        _ => Reply::ok("page")
            .header("Content-Type", "text/html")
            .header("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")
            .header("X-Powered-By", "PHP/8.2")
            .header("Set-Cookie", "visited=1"),
    })
    .await
}

/// Waits (bounded: 10 s) until the probed backend `apache` is healthy.
async fn until_healthy(shellac: &Shellac) {
    let healthy = eventually(Duration::from_secs(10), || async {
        let v: serde_json::Value =
            serde_json::from_slice(&get(shellac.admin, "/backends").await.body)
                .unwrap_or(serde_json::Value::Null);
        v["backends"].as_array().is_some_and(|b| {
            b.iter()
                .any(|b| b["name"] == "apache" && b["healthy"] == serde_json::Value::Bool(true))
        })
    })
    .await;
    assert!(healthy, "the probed backend never became healthy");
}

/// What one proxy did with the guide's requests, as the origin and the client saw it.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Origin requests per path after each step.
    origin: Vec<(&'static str, usize)>,
    /// `Set-Cookie` on the static file's second response, `X-Powered-By` on a page.
    static_cookie: bool,
    powered_by: bool,
    purge_status: u16,
}

async fn run(shellac: &Shellac, origin: &Origin) -> Outcome {
    until_healthy(shellac).await;
    let mut steps = Vec::new();
    let count = |p: &str| origin.count_path(p);

    // Static file, with a cookie: looked up without it, stored an hour, Set-Cookie removed.
    get_with(shellac.addr, "/style.css", &[("Cookie", "visited=1")]).await;
    let second = get_with(shellac.addr, "/style.css", &[("Cookie", "visited=1")]).await;
    steps.push(("/style.css twice", count("/style.css")));
    let static_cookie = second.header("set-cookie").is_some();

    // The admin: passed every time.
    get(shellac.addr, "/wp-admin/").await;
    get(shellac.addr, "/wp-admin/").await;
    steps.push(("/wp-admin/ twice", count("/wp-admin/")));

    // An anonymous page that expires at once: stored 120 s anyway.
    let page = get(shellac.addr, "/news").await;
    get(shellac.addr, "/news").await;
    steps.push(("/news twice", count("/news")));
    let powered_by = page.header("x-powered-by").is_some();

    // A logged-in user: passed.
    get_with(
        shellac.addr,
        "/news",
        &[("Cookie", "wordpress_logged_in_abc=1")],
    )
    .await;
    steps.push(("/news logged in", count("/news")));

    // PURGE from loopback, then the page is fetched again.
    let purge = request(shellac.addr, "PURGE", "/news", &[], b"").await;
    get(shellac.addr, "/news").await;
    steps.push(("/news after PURGE", count("/news")));

    // Tracking parameters: the VCL removes them (a hit on /news), TOML cannot (a miss).
    get(shellac.addr, "/news?utm_source=mail").await;
    steps.push((
        "/news?utm_source=mail",
        count("/news") + count("/news?utm_source=mail"),
    ));

    Outcome {
        origin: steps,
        static_cookie,
        powered_by,
        purge_status: purge.status,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_varnish_guides_wordpress_vcl_and_its_toml_translation_agree() {
    // The VCL, as the guide prints it, pointed at the origin.
    let origin = wordpress().await;
    let vcl = block(EXAMPLE, "vcl")
        .replace(
            ".host = \"127.0.0.1\";",
            &format!(".host = \"{}\";", origin.addr.ip()),
        )
        .replace(
            ".port = \"8080\";",
            &format!(".port = \"{}\";", origin.addr.port()),
        );
    let shellac = start_vcl("migration-wordpress", &vcl, &[]).await;
    let by_vcl = run(&shellac, &origin).await;
    shellac.stop().await;

    // The TOML translation, as the guide prints it, on ephemeral ports and the same kind of
    // origin (a fresh one, so the counts start at 0).
    let origin = wordpress().await;
    let shellac = start_toml(
        "migration-wordpress-toml",
        &block(EXAMPLE, "toml"),
        origin.addr,
    )
    .await;
    let by_toml = run(&shellac, &origin).await;
    shellac.stop().await;

    let expected = |tracking: usize| Outcome {
        origin: vec![
            ("/style.css twice", 1),
            ("/wp-admin/ twice", 2),
            ("/news twice", 1),
            ("/news logged in", 2),
            ("/news after PURGE", 3),
            ("/news?utm_source=mail", tracking),
        ],
        static_cookie: false,
        powered_by: false,
        purge_status: 200,
    };
    assert_eq!(by_vcl, expected(3), "the guide's VCL");
    assert_eq!(by_toml, expected(4), "the guide's TOML translation");
}

/// An application origin: pages without freshness information (`/plain`, the others with a
/// cookie: like nginx, Shellac stores no response with `Set-Cookie` unless told), a static file
/// the application says not to store (and sets a cookie on), a 404 it gives an hour, an image.
async fn application() -> Origin {
    Origin::start(|seen| match seen.path.as_str() {
        "/static/app.js" => Reply::ok("js()")
            .header("Content-Type", "application/javascript")
            .header("Set-Cookie", "session=abc")
            .cc("no-store"),
        "/missing" => Reply::ok("not here").status(404).cc("max-age=3600"),
        "/logo.png" => Reply::ok("png").header("Content-Type", "image/png"),
        "/plain" => Reply::ok("page").header("Content-Type", "text/html"),
        _ => Reply::ok("page")
            .header("Content-Type", "text/html")
            .header("Set-Cookie", "seen=1"),
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nginx_guides_translation_does_what_its_directives_did() {
    let guide = include_str!("../docs/migrating-from-nginx.md");
    let origin = application().await;
    let toml = block_of(guide, "## A worked example", "toml");
    let shellac = start_toml("migration-nginx", &toml, origin.addr).await;

    // location = /healthz { return 200 "ok"; }
    let health = get(shellac.addr, "/healthz").await;
    assert_eq!((health.status, health.text().as_str()), (200, "ok"));
    assert_eq!(origin.count_path("/healthz"), 0);

    // proxy_cache_valid 200 10m (default_ttl), and $cookie_session bypasses the cache.
    get(shellac.addr, "/plain").await;
    get(shellac.addr, "/plain").await;
    assert_eq!(
        origin.count_path("/plain"),
        1,
        "a page without freshness is kept"
    );
    assert_eq!(ttl_of(&shellac, "/plain").await, 600);
    get_with(shellac.addr, "/plain", &[("Cookie", "session=1")]).await;
    assert_eq!(
        origin.count_path("/plain"),
        2,
        "the session cookie bypasses the cache"
    );

    // location /static/: Cache-Control and Set-Cookie ignored, kept a day.
    get(shellac.addr, "/static/app.js").await;
    let js = get(shellac.addr, "/static/app.js").await;
    assert_eq!(origin.count_path("/static/app.js"), 1);
    assert!(js.header("set-cookie").is_none());
    assert_eq!(ttl_of(&shellac, "/static/app.js").await, 86_400);

    // proxy_cache_valid 404 1m: at most a minute, whatever the application said.
    get(shellac.addr, "/missing").await;
    get(shellac.addr, "/missing").await;
    assert_eq!(origin.count_path("/missing"), 1);
    assert_eq!(ttl_of(&shellac, "/missing").await, 60);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apache_guides_translations_do_what_their_directives_did() {
    let guide = include_str!("../docs/migrating-from-apache.md");

    // Apache 1.3 (the brief's incident 1): CacheDefaultExpire 2 (hours), NoCache a host.
    let origin = application().await;
    let toml = block_of(guide, "## Apache 1.3", "toml");
    let shellac = start_toml("migration-apache13", &toml, origin.addr).await;
    get(shellac.addr, "/logo.png").await;
    get(shellac.addr, "/logo.png").await;
    assert_eq!(origin.count_path("/logo.png"), 1);
    assert_eq!(ttl_of(&shellac, "/logo.png").await, 7_200);
    let private = [("Host", "private.example.com")];
    get_with(shellac.addr, "/logo.png", &private).await;
    get_with(shellac.addr, "/logo.png", &private).await;
    assert_eq!(
        origin.count_path("/logo.png"),
        3,
        "NoCache private.example.com"
    );
    shellac.stop().await;

    // Apache 2.4: the robot, the redirect, CacheDisable, CacheIgnoreHeaders, ExpiresByType.
    let origin = application().await;
    let toml = block_of(guide, "## Apache 2.4", "toml");
    let shellac = start_toml("migration-apache24", &toml, origin.addr).await;
    let bot = get_with(shellac.addr, "/page", &[("User-Agent", "a badbot/1.0")]).await;
    assert_eq!(bot.status, 403);
    let moved = get(shellac.addr, "/blog/2009/hello").await;
    assert_eq!(
        (moved.status, moved.header("location")),
        (301, Some("/news/2009/hello"))
    );
    assert_eq!(
        origin.count(),
        0,
        "the robot and the redirect never reach Apache"
    );
    get(shellac.addr, "/admin/").await;
    get(shellac.addr, "/admin/").await;
    assert_eq!(origin.count_path("/admin/"), 2, "CacheDisable /admin");
    get(shellac.addr, "/page").await;
    let page = get(shellac.addr, "/page").await;
    assert_eq!(origin.count_path("/page"), 1, "CacheDefaultExpire 3600");
    assert!(
        page.header("set-cookie").is_none(),
        "CacheIgnoreHeaders Set-Cookie"
    );
    assert_eq!(ttl_of(&shellac, "/page").await, 3_600);
    let png = get(shellac.addr, "/logo.png").await;
    assert_eq!(png.header("cache-control"), Some("max-age=86400"));
    assert_eq!(ttl_of(&shellac, "/logo.png").await, 86_400);
    shellac.stop().await;
}
