//! The worked WordPress example of docs/migrating-from-varnish.md, run: the VCL as Varnish
//! would run it and the TOML file the guide gives as its equivalent, each in front of the same
//! scripted origin, must agree on what is cached, passed, purged and stripped — and differ only
//! where the guide says they do (tracking parameters: the VCL removes them from the URL, the
//! TOML file cannot). The blocks are read from the guide itself (tests/docs.rs checks that they
//! load), so the guide's promise is held to behaviour, not just to syntax.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::vcl::start_vcl;
use common::*;

const GUIDE: &str = include_str!("../docs/migrating-from-varnish.md");

/// The first ```LANG block after `heading` in the guide.
fn block(heading: &str, lang: &str) -> String {
    let start = GUIDE
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?}"));
    let fence = format!("```{lang}\n");
    let open = GUIDE[start..].find(&fence).expect("the block") + start + fence.len();
    let close = GUIDE[open..].find("```").expect("its end") + open;
    GUIDE[open..close].to_string()
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
    let dir = temp_dir("migration-wordpress-toml");
    let path = dir.join("shellac.toml");
    std::fs::write(&path, block(EXAMPLE, "toml")).unwrap();
    let mut config = shellac::config::Config::load(&path).expect("the guide's TOML loads");
    config.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
    config.server.admin = Some("127.0.0.1:0".parse().unwrap());
    config.backends[0].host = origin.addr.ip().to_string();
    config.backends[0].port = origin.addr.port();
    let running = shellac::server::start(Arc::new(config))
        .await
        .expect("starts");
    let shellac = Shellac::from_running(running);
    let by_toml = run(&shellac, &origin).await;
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();

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
