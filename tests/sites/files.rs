//! Sites that serve files: each from its own root, directory listings per site, and the two
//! examples (examples/static-site.toml's precompressed siblings, examples/sites.toml's 2009
//! layout with `.flv` seeks).

use super::*;

/// examples/sites.toml: the 2009 operator's layout — the rewrite on `www.domain.com`, its
/// `.flv` videos from the site's document root with `?start=` seeks, logged-in users passed,
/// any other host on the default site, and the static host's images kept a day whatever
/// the origin says while its other answers keep the origin's lifetime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2009_layout_example_works() {
    let apache = named("apache").await;
    // The static server says a minute, in the type each path claims; nothing for
    // /plain.txt, a year for /long.txt.
    let static_origin = Origin::start(|seen| {
        let kind = if seen.path.ends_with(".png") {
            "image/png"
        } else {
            "text/plain"
        };
        let reply = Reply::ok(&format!("static {}", seen.path)).header("content-type", kind);
        match seen.path.as_str() {
            "/plain.txt" => reply,
            "/long.txt" => reply.cc("max-age=31536000"),
            _ => reply.cc("max-age=60"),
        }
    })
    .await;
    let dir = temp_dir("sites-2009");
    let site_root = dir.join("domain.com");
    std::fs::create_dir_all(&site_root).unwrap();
    let mut flv = b"FLV\x01\x05\0\0\0\x09\0\0\0\0".to_vec();
    flv.extend((0..1000u32).map(|i| (i % 251) as u8));
    std::fs::write(site_root.join("video.flv"), &flv).unwrap();
    let shellac = Shellac::start_file("examples/sites.toml", apache.addr, |c| {
        let site = c.sites.iter_mut().find(|s| s.name == "domain").unwrap();
        site.root = Some(site_root.clone());
        let media = c.backends.iter_mut().find(|b| b.name == "media").unwrap();
        media.root = Some(dir.clone());
        let statics = c.backends.iter_mut().find(|b| b.name == "static").unwrap();
        statics.port = static_origin.addr.port();
    })
    .await;
    let r = get_host(shellac.addr, "www.domain.com", "/video.flv").await;
    assert_eq!((r.status, &r.body[..]), (200, &flv[..]));
    let r = get_host(shellac.addr, "domain.com", "/video.flv?start=413").await;
    assert_eq!(r.status, 200);
    assert_eq!(&r.body[..13], &flv[..13], "the FLV header");
    assert_eq!(&r.body[13..], &flv[413..], "then the file from byte 413");
    // The default site has no such video (nor the media backend's own root).
    assert_eq!(
        get_host(shellac.addr, "66.55.44.33", "/video.flv")
            .await
            .text(),
        "apache /video.flv"
    );
    let r = get_host(shellac.addr, "www.domain.com", "/external/1234/").await;
    assert_eq!(r.text(), "apache /external.php?vid=1234");
    let r = get_host(shellac.addr, "www.domain.com", "/external/1234").await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    // Keys include the host: the site's other name is another object.
    let r = get_host(shellac.addr, "domain.com", "/external/1234").await;
    assert_eq!(r.text(), "apache /external.php?vid=1234");
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    // The default site has no rewrite.
    let r = get_host(shellac.addr, "66.55.44.33", "/external/1234/").await;
    assert_eq!(r.text(), "apache /external/1234/");
    // Logged-in WordPress users are never answered from the cache (the page above is stored).
    let r = get_with(
        shellac.addr,
        "/external/1234",
        &[
            ("host", "www.domain.com"),
            ("cookie", "wordpress_logged_in_1=u"),
        ],
    )
    .await;
    assert_eq!(r.text(), "apache /external.php?vid=1234");
    assert!(
        r.cache_status().contains("detail=rule"),
        "{}",
        r.cache_status()
    );
    // static.domain.com: an image is kept a day whatever the origin says (`media-1d`), a
    // text file for the origin's minute; the site's `default_ttl` (an hour) is for answers
    // without a lifetime, its `max_ttl` (a week) caps the origin's year.
    for (path, at_least, at_most) in [
        ("/logo.png", 86_000, 86_400),
        ("/robots.txt", 1, 60),
        ("/plain.txt", 3_500, 3_600),
        ("/long.txt", 604_000, 604_800),
    ] {
        let r = get_host(shellac.addr, "static.domain.com", path).await;
        assert_eq!(r.text(), format!("static {path}"));
        let r = get_host(shellac.addr, "static.domain.com", path).await;
        let ttl: u64 = r
            .cache_status()
            .split("ttl=")
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{path}: {}", r.cache_status()));
        assert!((at_least..=at_most).contains(&ttl), "{path}: ttl {ttl}");
    }
    assert_eq!(static_origin.count(), 4, "one fetch per object");
    let metrics = get(shellac.admin, "/metrics").await.text();
    assert!(
        metrics.contains("shellac_site_hit_total{site=\"static\"} 4"),
        "{metrics}"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// nginx's `root` in a `server { }`: `[[site]] root` is the document root of the files
/// backend for that site's requests; a site without one serves the backend's own root. The
/// same path on two sites is two files (and two cache objects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_site_serves_files_from_its_own_root() {
    let dir = temp_dir("sites-root");
    for (site, text) in [("main", "main page"), ("blog", "blog page")] {
        std::fs::create_dir_all(dir.join(site)).unwrap();
        write(&dir.join(site).join("index.html"), text);
    }
    write(&dir.join("blog").join("only-blog.txt"), "blog only");
    let text = format!(
        r#"{SERVER}
[[backend]]
name = "files"
protocol = "files"
root = "{main}"

[[site]]
name = "blog"
server_name = "blog.test"
root = "{blog}"
[[site]]
name = "main"
default = true
"#,
        main = dir.join("main").display(),
        blog = dir.join("blog").display(),
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    for _ in 0..2 {
        assert_eq!(get_host(addr, "blog.test", "/").await.text(), "blog page");
        assert_eq!(get_host(addr, "www.test", "/").await.text(), "main page");
    }
    assert_eq!(
        get_host(addr, "blog.test", "/only-blog.txt").await.text(),
        "blog only"
    );
    assert_eq!(
        get_host(addr, "www.test", "/only-blog.txt").await.status,
        404
    );
    // A reload that moves the site's root serves the new one.
    write(
        &dir.join("main").join("moved.txt"),
        "now from main's directory",
    );
    write(
        &file,
        &text.replace(
            &format!("root = \"{}\"\n[[site]]", dir.join("blog").display()),
            &format!("root = \"{}\"\n[[site]]", dir.join("main").display()),
        ),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        get_host(addr, "blog.test", "/moved.txt").await.text(),
        "now from main's directory"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// nginx's `autoindex` in a `server { }`: `[[site]] autoindex` lists directories without an
/// index file for that site's requests only, with the backend's root or the site's own; the
/// other sites keep the backend's setting (403), and a site can turn a backend's listings off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_listings_are_on_per_site() {
    let dir = temp_dir("sites-autoindex");
    for sub in ["shared/pub", "own/pub"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    write(&dir.join("shared/pub/shared-file.txt"), "s");
    write(&dir.join("own/pub/own-file.txt"), "o");
    let text = format!(
        r#"{SERVER}
[[backend]]
name = "files"
protocol = "files"
root = "{shared}"

[[backend]]
name = "listing"
protocol = "files"
root = "{shared}"
autoindex = true

[[site]]
name = "docs"
server_name = "docs.test"
autoindex = true
[[site]]
name = "own"
server_name = "own.test"
root = "{own}"
autoindex = true
[[site]]
name = "closed"
server_name = "closed.test"
backend = "listing"
autoindex = false
[[site]]
name = "open"
server_name = "open.test"
backend = "listing"
[[site]]
name = "main"
default = true
"#,
        shared = dir.join("shared").display(),
        own = dir.join("own").display(),
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    let docs = get_host(addr, "docs.test", "/pub/").await;
    assert_eq!(docs.status, 200);
    assert!(docs.text().contains("shared-file.txt"), "{}", docs.text());
    let own = get_host(addr, "own.test", "/pub/").await;
    assert_eq!(own.status, 200);
    assert!(own.text().contains("own-file.txt"), "{}", own.text());
    assert!(!own.text().contains("shared-file.txt"), "{}", own.text());
    assert_eq!(get_host(addr, "www.test", "/pub/").await.status, 403);
    assert_eq!(get_host(addr, "closed.test", "/pub/").await.status, 403);
    let open = get_host(addr, "open.test", "/pub/").await;
    assert_eq!(open.status, 200);
    assert!(open.text().contains("shared-file.txt"), "{}", open.text());
    // Files are served as before on every site.
    assert_eq!(
        get_host(addr, "docs.test", "/pub/shared-file.txt")
            .await
            .text(),
        "s"
    );
    assert_eq!(
        get_host(addr, "www.test", "/pub/shared-file.txt")
            .await
            .text(),
        "s"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// examples/static-site.toml: a static site whose deploy made `.gz` / `.br` siblings: the
/// cache is filled with the `.gz` as made (no compression at run time), gzip clients get it,
/// others get it decoded; fingerprinted assets are kept a year, immutable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_static_site_example_sends_precompressed_siblings() {
    use std::io::Write;
    let unused = named("unused").await;
    let dir = temp_dir("sites-static");
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    let js = "console.log('hello');\n".repeat(50);
    write(&dir.join("assets/app.3f9a1c.js"), &js);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(js.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    std::fs::write(dir.join("assets/app.3f9a1c.js.gz"), &gz).unwrap();
    let mut br = Vec::new();
    brotli::BrotliCompress(
        &mut js.as_bytes(),
        &mut br,
        &brotli::enc::BrotliEncoderParams::default(),
    )
    .unwrap();
    std::fs::write(dir.join("assets/app.3f9a1c.js.br"), &br).unwrap();
    write(&dir.join("index.html"), "<h1>home</h1>");
    let shellac = Shellac::start_file("examples/static-site.toml", unused.addr, |c| {
        c.backends[0].root = Some(dir.clone());
    })
    .await;
    let addr = shellac.addr;
    let host = ("host", "www.example.org");
    let r = get_with(addr, "/", &[host]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>home</h1>"));
    let r = get_with(
        addr,
        "/assets/app.3f9a1c.js",
        &[host, ("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(&r.body[..], &gz[..]);
    assert!(
        r.header("vary")
            .is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")),
        "{:?}",
        r.headers
    );
    assert!(
        r.header("cache-control")
            .is_some_and(|v| v.contains("immutable")),
        "{:?}",
        r.headers
    );
    // Each class of client is cached on its own: the file itself without `Accept-Encoding`,
    // the `.br` sibling for br (not the stored `.gz` decoded).
    let r = get_with(addr, "/assets/app.3f9a1c.js", &[host]).await;
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.text(), js);
    let r = get_with(
        addr,
        "/assets/app.3f9a1c.js",
        &[host, ("accept-encoding", "br")],
    )
    .await;
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(&r.body[..], &br[..]);
    let r = get_with(
        addr,
        "/assets/app.3f9a1c.js",
        &[host, ("accept-encoding", "gzip")],
    )
    .await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// A files backend's refusals carry the backend's and the site's label: two sites on one
/// files backend (each its own root) and a third on another, each probed differently —
/// `/metrics` `shellac_backend_files_refused_total{backend,reason}` and
/// `shellac_site_files_refused_total{site,reason}`, `/backends` and `/sites` under the
/// counters' names — while the process-wide totals still add them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_counted_per_backend_and_per_site() {
    let dir = temp_dir("sites-refusals");
    for sub in ["main", "blog", "shop"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        write(&dir.join(sub).join("index.html"), sub);
        write(&dir.join(sub).join(".env"), "PASSWORD=1");
    }
    let text = format!(
        r#"{SERVER}
[[backend]]
name = "files"
protocol = "files"
root = "{main}"

[[backend]]
name = "other"
protocol = "files"
root = "{shop}"

[[site]]
name = "blog"
server_name = "blog.test"
root = "{blog}"
[[site]]
name = "shop"
server_name = "shop.test"
backend = "other"
[[site]]
name = "main"
default = true
"#,
        main = dir.join("main").display(),
        blog = dir.join("blog").display(),
        shop = dir.join("shop").display(),
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    // Before any request: every site's refusal series, at 0 (a files backend is configured).
    let metrics = get(shellac.admin, "/metrics").await.text();
    for site in ["blog", "shop", "main"] {
        let line =
            format!("shellac_site_files_refused_total{{site=\"{site}\",reason=\"dotfile\"}} 0");
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
    // (host, path, status): each path asked once, so no stored refusal is served again.
    for (host, path, status) in [
        ("blog.test", "/.env", 404),
        ("blog.test", "/.htpasswd", 404),
        ("www.test", "/wp-config.php", 404),
        ("shop.test", "/.git/config", 404),
        ("shop.test", "/", 200),
    ] {
        assert_eq!(
            get_host(addr, host, path).await.status,
            status,
            "{host}{path}"
        );
    }
    let metrics = get(shellac.admin, "/metrics").await.text();
    for line in [
        "shellac_backend_files_refused_total{backend=\"files\",reason=\"dotfile\"} 2",
        "shellac_backend_files_refused_total{backend=\"files\",reason=\"script\"} 1",
        "shellac_backend_files_refused_total{backend=\"files\",reason=\"traversal\"} 0",
        "shellac_backend_files_refused_total{backend=\"other\",reason=\"dotfile\"} 1",
        "shellac_backend_files_refused_total{backend=\"other\",reason=\"script\"} 0",
        "shellac_site_files_refused_total{site=\"blog\",reason=\"dotfile\"} 2",
        "shellac_site_files_refused_total{site=\"blog\",reason=\"script\"} 0",
        "shellac_site_files_refused_total{site=\"main\",reason=\"script\"} 1",
        "shellac_site_files_refused_total{site=\"main\",reason=\"dotfile\"} 0",
        "shellac_site_files_refused_total{site=\"shop\",reason=\"dotfile\"} 1",
        "shellac_files_refused_dotfile_total 3",
        "shellac_files_script_refused_total 1",
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
    let backends: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/backends").await.body).unwrap();
    let backend = |name: &str| {
        backends["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(backend("files")["files_refused_dotfile"], 2);
    assert_eq!(backend("files")["files_script_refused"], 1);
    assert_eq!(backend("other")["files_refused_dotfile"], 1);
    assert_eq!(backend("other")["files_script_refused"], 0);
    let sites: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/sites").await.body).unwrap();
    let site = |name: &str| {
        sites
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(site("blog")["files_refused_dotfile"], 2);
    assert_eq!(site("main")["files_script_refused"], 1);
    assert_eq!(site("main")["files_refused_dotfile"], 0);
    assert_eq!(site("shop")["files_refused_dotfile"], 1);
    assert_eq!(shellac.stat("files_refused_dotfile").await, 3);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}
