//! Files routed by rules: `try_files` and its fallback, directory listings (only when on,
//! only what is served, escaped and safe), hotlinks refused and signed links that expire.

use super::*;

use super::refusals::raw_status;

/// A files backend (`name`, under `root`) with `try_files`, for the requests whose path
/// matches `path`.
fn routed_files(
    c: &mut shellac::config::Config,
    name: &str,
    root: &Path,
    try_files: &[&str],
    path: &str,
) {
    let mut b = shellac::config::BackendConfig::new(name, "", 80);
    b.protocol = shellac::config::BackendProtocol::Files;
    b.root = Some(root.to_path_buf());
    b.try_files = try_files.iter().map(|s| s.to_string()).collect();
    c.backends.push(b);
    c.rules.push(shellac::config::rules::RuleConfig {
        path: Some(path.to_string()),
        director: Some(name.to_string()),
        ..Default::default()
    });
}

/// nginx's `try_files`: the first path that names a file (or, ending in `/`, a directory)
/// is served; else the fallback: another backend with the request unchanged, a status, or a
/// file of the root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_files_serves_the_first_that_exists_else_the_fallback() {
    let dir = site();
    let www = dir.0.join("www");
    std::fs::write(www.join("about.html"), "<p>about</p>").unwrap();
    let app = Origin::start(|s| Reply::ok(&format!("app saw {}", s.path)).cc("no-store")).await;
    let app_addr = app.addr;
    let sh = Shellac::start_files(&www, |c| {
        let b = &mut c.backends[0];
        b.try_files = ["$uri", "$uri.html", "$uri/", "@app"]
            .map(String::from)
            .to_vec();
        c.backends.push(shellac::config::BackendConfig::new(
            "app",
            &app_addr.ip().to_string(),
            app_addr.port(),
        ));
        routed_files(c, "spa", &www, &["$uri", "/docs/index.html"], "^/spa/");
        routed_files(c, "gone", &www, &["$uri", "=410"], "^/gone/");
        // A fixed directory entry (nginx's http_try_files.t "dir-dir").
        routed_files(
            c,
            "dirdir",
            &www,
            &["/docs/", "=404"],
            "^/(dir-dir/|docs/$)",
        );
    })
    .await;
    let r = get(sh.addr, "/app.js").await;
    assert_eq!((r.status, r.text().as_str()), (200, "console.log(1);\n"));
    let r = get(sh.addr, "/about").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "<p>about</p>"),
        "$uri.html"
    );
    assert_eq!(r.header("content-type"), Some("text/html"));
    // `$uri/` for a directory asked for without its `/`: a 301 to it (nginx's try_files.t
    // "root $uri/ redirect"), so the index's relative links resolve inside it; then its index.
    let r = get(sh.addr, "/docs?v=2").await;
    assert_eq!(r.status, 301, "$uri/ without the slash");
    assert_eq!(r.header("location"), Some("/docs/?v=2"));
    let r = get(sh.addr, "/docs/").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "<h1>docs</h1>"),
        "$uri/"
    );
    // A fixed `/docs/` entry: a 301 to `/docs/` (the query kept) whatever the path asked,
    // slashed or not, as nginx; for `/docs/` itself its index, not a redirect loop (the
    // `/docs/` above went to that backend).
    let r = get(sh.addr, "/dir-dir/?x=1").await;
    assert_eq!(r.status, 301, "fixed directory entry");
    assert_eq!(r.header("location"), Some("/docs/?x=1"));
    let r = get(sh.addr, "/dir-dir/deeper").await;
    assert_eq!((r.status, r.header("location")), (301, Some("/docs/")));
    let r = get(sh.addr, "/blog/2009/post?p=7").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "app saw /blog/2009/post?p=7"),
        "@app gets the request unchanged"
    );
    assert_eq!(sh.stat("files_try_next").await, 1);
    // What the files origin refuses is refused, not handed on.
    assert_eq!(raw_status(sh.addr, "/.env").await.0, 404);
    assert_eq!(raw_status(sh.addr, "/%2e%2e/secret.txt").await.0, 400);
    assert_eq!(app.count(), 1);
    // A path fallback serves that file; a status fallback answers it.
    let r = get(sh.addr, "/spa/some/route").await;
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>docs</h1>"));
    assert_eq!(get(sh.addr, "/gone/x").await.status, 410);
    assert_eq!(get(sh.addr, "/app.js?gone").await.status, 200);
}

/// `autoindex = true`: a directory without an index is listed — only what would be served,
/// directories first, names HTML-escaped, links percent-encoded and usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_listings_only_when_on_escaped_and_safe() {
    let dir = site();
    let www = dir.0.join("www");
    let list = www.join("list");
    std::fs::create_dir_all(list.join("sub")).unwrap();
    std::fs::write(list.join("a.txt"), "a").unwrap();
    std::fs::write(list.join("<b>&\"c'.txt"), "tricky").unwrap();
    std::fs::write(list.join("javascript:x"), "j").unwrap();
    std::fs::write(list.join(".hidden"), "h").unwrap();
    std::os::unix::fs::symlink(dir.0.join("secret.txt"), list.join("out")).unwrap();
    let sh = files(&www, |b| b.autoindex = false).await;
    assert_eq!(get(sh.addr, "/list/").await.status, 403, "off by default");
    sh.stop().await;
    let sh = files(&www, |b| b.autoindex = true).await;
    let r = get_with(sh.addr, "/list/", &[PASS]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let page = r.text();
    assert!(page.contains("<title>Index of /list/</title>"), "{page}");
    let sub = page.find("href=\"sub/\"").expect("the directory is listed");
    let a = page.find("href=\"a.txt\"").expect("the file is listed");
    assert!(sub < a, "directories first\n{page}");
    assert!(
        page.contains("&lt;b&gt;&amp;&quot;c&#39;.txt</a>"),
        "escaped\n{page}"
    );
    assert!(!page.contains("<b>"), "{page}");
    assert!(page.contains("href=\"javascript%3Ax\""), "{page}");
    assert!(page.contains("href=\"../\""), "{page}");
    assert!(!page.contains("hidden"), "dotfiles are not listed\n{page}");
    assert!(
        !page.contains("out"),
        "links out of the root are not listed\n{page}"
    );
    let link = page
        .split("href=\"")
        .find(|s| s.contains("c%27.txt"))
        .and_then(|s| s.split('"').next())
        .expect("a link to the tricky name")
        .to_string();
    let r = get(sh.addr, &format!("/list/{link}")).await;
    assert_eq!((r.status, r.text().as_str()), (200, "tricky"), "{link}");
    // A directory with an index is still its index; the root is listed without `../`.
    assert_eq!(get(sh.addr, "/docs/").await.text(), "<h1>docs</h1>");
    let root = get_with(sh.addr, "/", &[PASS]).await.text();
    assert!(
        root.contains("href=\"list/\"") && !root.contains("href=\"../\""),
        "{root}"
    );
    let head = request(sh.addr, "HEAD", "/list/", &[PASS], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
}

/// The names a listing links to, in order (`../` left out).
fn listed(page: &str) -> Vec<String> {
    page.split("<a href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .filter(|href| *href != "../")
        .map(String::from)
        .collect()
}

/// A listing shows only what the files origin would serve: scripts (files and directories
/// named like one), dotfiles, links out of the root and special files are left out by
/// default, and every link listed answers `200`; `send_scripts`, `dotfiles` and
/// `follow_symlinks` each bring theirs back, links that then answer `200` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_shows_only_what_is_served() {
    let dir = site();
    let www = dir.0.join("www");
    let list = www.join("kinds");
    std::fs::create_dir_all(list.join("app.phar")).unwrap();
    std::fs::create_dir_all(list.join("sub")).unwrap();
    for (name, body) in [
        ("a.txt", "a"),
        ("x.php", "<?php // secret"),
        ("y.PHTML", "<?php // secret"),
        ("z.php5", "<?php // secret"),
        ("notes.php.txt", "text"),
        (".env", "PASSWORD=1"),
        ("app.phar/readme.txt", "inside"),
    ] {
        std::fs::write(list.join(name), body).unwrap();
    }
    std::os::unix::fs::symlink(dir.0.join("secret.txt"), list.join("out.txt")).unwrap();
    std::os::unix::fs::symlink(www.join("text.txt"), list.join("in.txt")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(list.join("pipe"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let always = ["sub/", "a.txt", "in.txt", "notes.php.txt"];
    let opted = ["app.phar/", ".env", "out.txt", "x.php", "y.PHTML", "z.php5"];
    for opt_in in [false, true] {
        let sh = files(&www, |b| {
            b.autoindex = true;
            b.send_scripts = opt_in;
            b.dotfiles = opt_in;
            b.follow_symlinks = opt_in;
        })
        .await;
        let page = get_with(sh.addr, "/kinds/", &[PASS]).await.text();
        let links = listed(&page);
        for name in always {
            assert!(links.iter().any(|l| l == name), "{name} not listed\n{page}");
        }
        for name in opted {
            let shown = links.iter().any(|l| l == name);
            assert_eq!(shown, opt_in, "{name} (opted in: {opt_in})\n{page}");
        }
        assert!(!page.contains("pipe"), "a FIFO is never listed\n{page}");
        // What the page left out is counted on the backend: the opted-out names and the FIFO.
        let backends: serde_json::Value =
            serde_json::from_slice(&get(sh.admin, "/backends").await.body).unwrap();
        let entry = &backends["backends"][0];
        let omitted = if opt_in { 1 } else { opted.len() + 1 };
        assert_eq!(entry["files_listing_omitted"], omitted, "{entry}");
        assert_eq!(entry["files_listing_unlisted"], 0, "{entry}");
        assert_eq!(
            links.len(),
            always.len() + if opt_in { opted.len() } else { 0 }
        );
        // Every link listed is served.
        for link in &links {
            let r = get_with(sh.addr, &format!("/kinds/{link}"), &[PASS]).await;
            assert_eq!(r.status, 200, "{link} (opted in: {opt_in})");
        }
        assert_eq!(sh.stat("files_script_refused").await, 0);
        // What is left out is refused when asked for anyway.
        if !opt_in {
            for name in opted {
                let r = get_with(sh.addr, &format!("/kinds/{name}"), &[PASS]).await;
                assert_eq!(r.status, 404, "{name}");
            }
            assert_eq!(sh.stat("files_script_refused").await, 4);
        }
        sh.stop().await;
    }
}

/// Hotlink protection: a rule's `valid_referers` (403, also for what the cache holds) and
/// `secure_link` signed expiring links (403 wrong, 410 expired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hotlinks_are_refused_and_signed_links_expire() {
    use base64::Engine as _;
    let dir = site();
    let www = dir.0.join("www");
    std::fs::create_dir_all(www.join("img")).unwrap();
    std::fs::create_dir_all(www.join("paid")).unwrap();
    std::fs::write(www.join("img/cat.png"), "PNG").unwrap();
    std::fs::write(www.join("paid/movie.flv"), "FLV-MOVIE").unwrap();
    std::fs::create_dir_all(www.join("s")).unwrap();
    std::fs::write(www.join("s/clip.flv"), "FLV-CLIP").unwrap();
    std::fs::write(www.join("s/my clip.flv"), "FLV-SPACED").unwrap();
    let sh = Shellac::start_files(&www, |c| {
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some("^/s/".into()),
            secure_link: Some(shellac::config::rules::SecureLinkConfig {
                md5: Some("$secure_link_expires$uri$remote_addr secret".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some("^/img/".into()),
            valid_referers: ["none", "server_names", "*.friend.org"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        });
        c.rules.push(shellac::config::rules::RuleConfig {
            path: Some("^/paid/".into()),
            secure_link: Some(shellac::config::rules::SecureLinkConfig {
                secret: Some("k3y".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
    })
    .await;
    let r = get(sh.addr, "/img/cat.png").await;
    assert_eq!((r.status, r.text().as_str()), (200, "PNG"), "no Referer");
    assert_eq!(get(sh.addr, "/img/cat.png").await.status, 200, "a hit");
    let from = |referer: &'static str| [("referer", referer)];
    let r = get_with(sh.addr, "/img/cat.png", &from("http://evil.test/page")).await;
    assert_eq!(r.status, 403, "a stored copy is not a way round it");
    assert!(!r.text().contains("PNG"));
    let r = get_with(sh.addr, "/img/cat.png", &from("https://www.friend.org/x")).await;
    assert_eq!(r.status, 200);
    let r = get_with(
        sh.addr,
        "/img/cat.png",
        &[
            ("host", "www.mysite.test"),
            ("referer", "http://WWW.mysite.test:8080/gallery"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "server_names: the request's own host");
    assert_eq!(
        get(sh.addr, "/app.js").await.status,
        200,
        "other paths: no check"
    );

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"k3y");
    let signed = |path: &str, expires: u64| {
        let mac = ring::hmac::sign(&key, format!("{expires}{path}").as_bytes());
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.as_ref());
        format!("{path}?expires={expires}&sig={sig}")
    };
    let r = get(sh.addr, &signed("/paid/movie.flv", now + 3600)).await;
    assert_eq!((r.status, r.text().as_str()), (200, "FLV-MOVIE"));
    assert_eq!(
        get(sh.addr, &signed("/paid/movie.flv", now - 10))
            .await
            .status,
        410
    );
    let forged = signed("/paid/other.flv", now + 3600).replace("other", "movie");
    assert_eq!(get(sh.addr, &forged).await.status, 403);
    assert_eq!(get(sh.addr, "/paid/movie.flv").await.status, 403);
    // nginx's secure_link_md5 form, signed as nginx's documentation signs it:
    // `echo -n "$expires/s/clip.flv127.0.0.1 secret" | openssl md5 -binary | base64 | tr +/ -_`.
    let md5_signed = |path: &str, expires: u64| {
        let out = std::process::Command::new("md5sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                let mut stdin = child.stdin.take().unwrap();
                write!(stdin, "{expires}{path}127.0.0.1 secret")?;
                drop(stdin);
                child.wait_with_output()
            })
            .expect("md5sum runs");
        let hex = String::from_utf8(out.stdout).unwrap();
        let digest: Vec<u8> = (0..16)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
        format!("{path}?md5={sig}&expires={expires}")
    };
    let r = get(sh.addr, &md5_signed("/s/clip.flv", now + 3600)).await;
    assert_eq!((r.status, r.text().as_str()), (200, "FLV-CLIP"));
    let expired = md5_signed("/s/clip.flv", now - 10);
    assert_eq!(get(sh.addr, &expired).await.status, 410);
    let forged = md5_signed("/s/clip.flv", now + 3600).replace("expires=", "expires=1");
    assert_eq!(get(sh.addr, &forged).await.status, 403);
    assert_eq!(get(sh.addr, "/s/clip.flv").await.status, 403);
    // `$uri` is nginx's, decoded: the link to `/s/my clip.flv` is signed over the space,
    // the client sends `%20` (nginx's secure_link.t signs `secret$uri`).
    let spaced = md5_signed("/s/my clip.flv", now + 3600).replacen(' ', "%20", 1);
    let r = get(sh.addr, &spaced).await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "FLV-SPACED"),
        "{spaced}"
    );
    // An expiry of 0 is no valid link (nginx: `$secure_link` empty, 403), not an old one.
    let zero = md5_signed("/s/clip.flv", 0);
    assert_eq!(get(sh.addr, &zero).await.status, 403, "{zero}");
    assert_eq!(sh.stat("hotlink_refused").await, 8);
}
