//! What PHP answers and what is made of it: cookies and past `Expires` not cached (unless a
//! rule says so), `Status` / `Location` and a fatal error, a script that does not exist (404,
//! never run), a body streamed as PHP writes it, and the WordPress example.

use super::*;

/// A page setting cookies with an Expires in the past is not cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_and_a_past_expires_are_not_cached() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    for _ in 0..2 {
        let r = get(sh.addr, "/cookies.php").await;
        assert_eq!((r.status, r.text().as_str()), (200, "cookies"));
        let cookies: Vec<&str> = r
            .headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_location_and_a_fatal_error() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let r = get(sh.addr, "/redirect.php").await;
    assert_eq!((r.status, r.header("location")), (302, Some("/elsewhere")));
    let r = get(sh.addr, "/teapot.php").await;
    assert_eq!((r.status, r.text().as_str()), (418, "short and stout"));
    let r = get(sh.addr, "/info.php").await;
    assert_eq!(r.status, 200, "{:?} {}", r.headers, r.text());
    assert!(r.text().contains("PHP Version"), "phpinfo()");
    assert!(r.text().contains("FPM/FastCGI"), "phpinfo() names the SAPI");
    let r = get(sh.addr, "/fatal.php").await;
    assert_eq!(r.status, 500, "{}", r.text());
    // The pool is fine afterwards.
    assert_eq!(get(sh.addr, "/server.php").await.status, 200);
}

/// Never hand PHP a script that does not exist: `evil.jpg` is not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_does_not_exist_is_404_never_run() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    for path in [
        "/uploads/evil.jpg/x.php",
        "/uploads/evil.jpg/.php",
        "/nope.php",
        "/a/../../x.php",
    ] {
        let r = get(sh.addr, path).await;
        assert!(r.status == 404 || r.status == 400, "{path}: {}", r.status);
        assert!(!r.text().contains("EVIL"), "{path} ran the upload");
    }
    // Other paths go to the front controller; directories to their index.
    let r = get(sh.addr, "/some/pretty/url?q=1").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "front /some/pretty/url?q=1")
    );
    let r = get(sh.addr, "/blog").await;
    assert_eq!((r.status, r.header("location")), (301, Some("/blog/")));
}

/// Each path the FastCGI origin refuses before PHP sees it is counted under its reason
/// (`fastcgi_refused_*`, in /stats and /metrics): the `cgi.fix_pathinfo` attempt apart from a
/// script that is simply missing; the front controller's answers are not refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_php_are_counted_by_reason() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let asked = [
        ("/uploads/evil.jpg/x.php", 404, "fastcgi_refused_pathinfo"),
        (
            "/uploads/evil.jpg/y.php/more",
            404,
            "fastcgi_refused_pathinfo",
        ),
        ("/nope.php", 404, "fastcgi_refused_missing"),
        ("/uploads/gone.php", 404, "fastcgi_refused_missing"),
        ("/%2e%2e/etc/passwd.php", 400, "fastcgi_refused_traversal"),
        ("/a%c0%ae.php", 400, "fastcgi_refused_encoding"),
        ("/a%00.php", 400, "fastcgi_refused_control"),
        ("/a%2fb.php", 404, "fastcgi_refused_escaped_slash"),
        ("/.git/config.php", 404, "fastcgi_refused_dotfile"),
    ];
    for (target, status, _) in asked {
        let text = raw(
            sh.addr,
            format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status}")),
            "{target}\n{text}"
        );
        assert!(!text.contains("EVIL"), "{target} ran the upload");
    }
    // Not refusals: the front controller and a script that exists.
    assert_eq!(get(sh.addr, "/some/pretty/url").await.status, 200);
    assert_eq!(get(sh.addr, "/info.php").await.status, 200);
    let metrics = get(sh.admin, "/metrics").await.text();
    for counter in [
        "fastcgi_refused_pathinfo",
        "fastcgi_refused_missing",
        "fastcgi_refused_traversal",
        "fastcgi_refused_encoding",
        "fastcgi_refused_control",
        "fastcgi_refused_escaped_slash",
        "fastcgi_refused_dotfile",
    ] {
        let n = asked.iter().filter(|(_, _, c)| *c == counter).count() as u64;
        assert_eq!(sh.stat(counter).await, n, "{counter}");
        assert!(
            metrics.contains(&format!("shellac_{counter}_total {n}")),
            "{counter}\n{metrics}"
        );
    }
}

/// A response is passed on as the application writes it: the first part reaches the client
/// while the script still waits (for a file this test creates only once it has read it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_response_body_streams_as_php_writes_it() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let dir = TempDir::new("fcgi-stream");
    let go = dir.path("go");
    let mut conn = Conn::open(sh.addr).await;
    let resp = conn
        .send_head("GET", &format!("/stream.php?f={}", go.display()), &[], b"")
        .await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut seen = Vec::new();
    while !seen.ends_with(b"first;") {
        let frame = tokio::time::timeout(Duration::from_secs(20), body.frame())
            .await
            .expect("the first part before the script ends")
            .expect("a frame")
            .expect("a good frame");
        if let Ok(data) = frame.into_data() {
            seen.extend_from_slice(&data);
        }
    }
    std::fs::write(&go, "").unwrap();
    let rest = body.collect().await.unwrap().to_bytes();
    seen.extend_from_slice(&rest);
    assert_eq!(String::from_utf8_lossy(&seen), "first;second");
}

/// An Expires in the past keeps a page out of the cache, unless a rule says otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_past_expires_is_cached_only_when_a_rule_says_so() {
    let Some(fpm) = fpm() else { return };
    let plain = shellac(fpm, false).await;
    let a = get(plain.addr, "/expired.php").await;
    let b = get(plain.addr, "/expired.php").await;
    assert_eq!((a.status, b.status), (200, 200));
    assert_ne!(a.text(), b.text(), "run twice");
    let rules = shellac::config::Config::parse(
        "[[backend]]\nhost = \"127.0.0.1\"\n[[rule]]\npath = '^/expired\\.php$'\nttl = \"1m\"\noverride_origin = true\n",
        "t.toml",
    )
    .unwrap()
    .rules;
    let ruled = shellac_with(fpm, false, |c| c.rules = rules).await;
    let a = get(ruled.addr, "/expired.php").await;
    let b = get(ruled.addr, "/expired.php").await;
    assert_eq!(
        a.text(),
        b.text(),
        "stored by the rule: {:?} {:?}",
        a.headers,
        b.headers
    );
    assert!(b.cache_status().contains("hit"), "{}", b.cache_status());
}

/// examples/wordpress-fpm.toml against the fixtures: static files from disk, `.php` run (never
/// sent as text), pretty permalinks through the front controller and cached, logged-in users
/// passed, a script that is not there 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wordpress_on_php_fpm_example_works() {
    let Some(fpm) = fpm() else { return };
    let sh = Shellac::start_file("examples/wordpress-fpm.toml", fpm.tcp, |c| {
        for b in &mut c.backends {
            b.root = Some(fpm.root.clone());
        }
        let php = &mut c.backends[0];
        php.address = None;
        php.max_connections = CHILDREN;
    })
    .await;
    let r = get(sh.addr, "/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "front /"));
    let r = get(sh.addr, "/2026/11/hello-world/").await;
    assert_eq!(r.text(), "front /2026/11/hello-world/");
    let r = get(sh.addr, "/2026/11/hello-world/").await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    let cookie = [("cookie", "wordpress_logged_in_abc=1")];
    let r = get_with(sh.addr, "/2026/11/hello-world/", &cookie).await;
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    let r = get(sh.addr, "/info.php").await;
    assert!(r.text().contains("PHP Version"), "run, not sent");
    assert!(!r.text().contains("<?php"));
    let r = get(sh.addr, "/style.css").await;
    assert_eq!(
        (r.status, r.header("content-type"), r.text().as_str()),
        (200, Some("text/css"), "body { color: #333 }")
    );
    let r = get(sh.addr, "/uploads/evil.jpg/x.php").await;
    assert_eq!(r.status, 404);
    assert_eq!(get(sh.addr, "/blog").await.status, 301);
    assert_eq!(get(sh.addr, "/blog/").await.text(), "blog index");
}

/// docs/static-files.md's WordPress `try_files`: the files backend first, `@php` when no file
/// is there. A script is run by PHP, never sent from disk as text though the file exists
/// (nginx's `location ~ \.php$` in front of the `location /` that holds `try_files`), nor a
/// directory's index that is a script; a script that is not there is still 404, never run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_files_hands_scripts_to_php_never_their_source() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac_with(fpm, false, |c| {
        c.backends[0].name = "php".into();
        let mut files = shellac::config::BackendConfig::new("static", "", 80);
        files.protocol = BackendProtocol::Files;
        files.root = Some(fpm.root.clone());
        files.try_files = ["$uri", "$uri/", "@php"].map(String::from).to_vec();
        // nginx's `index index.php index.html;`: a directory's index may be a script.
        files.index = Some(["index.php", "index.html"].map(String::from).to_vec());
        c.backends.insert(0, files);
    })
    .await;
    let r = get(sh.addr, "/server.php/extra?x=1").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(json(&r)["SCRIPT_NAME"], "/server.php", "run by PHP");
    for path in ["/info.php", "/INFO.PHP", "/info%2ephp"] {
        let r = get(sh.addr, path).await;
        assert!(!r.text().contains("<?php"), "{path}: the source was sent");
        if path != "/INFO.PHP" {
            assert!(r.text().contains("PHP Version"), "{path}: run");
        }
    }
    // Files are still the files backend's; what is not there goes to the front controller.
    let r = get(sh.addr, "/style.css").await;
    assert_eq!(
        (r.status, r.header("content-type"), r.text().as_str()),
        (200, Some("text/css"), "body { color: #333 }")
    );
    let r = get(sh.addr, "/2026/11/hello-world/").await;
    assert_eq!(r.text(), "front /2026/11/hello-world/");
    assert_eq!(get(sh.addr, "/uploads/evil.jpg/x.php").await.status, 404);
    assert_eq!(get(sh.addr, "/nothere.php").await.status, 404);
    // A directory whose index is a script: run by PHP, not sent; asked for without its
    // slash, first a 301 to it from `$uri/` (nginx's try_files), never handed to PHP as is.
    let r = get(sh.addr, "/blog?p=1").await;
    assert_eq!((r.status, r.header("location")), (301, Some("/blog/?p=1")));
    let r = get(sh.addr, "/blog/").await;
    assert_eq!((r.status, r.text().as_str()), (200, "blog index"));
    // Every one of them but the stylesheet was handed on by the files backend.
    assert_eq!(sh.stat("files_try_next").await, 8);
}
