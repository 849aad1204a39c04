//! Running VCL: `[vcl] file` in the TOML with its log lines and reloads, `shellac check` and
//! `shellac serve --vcl`, and fast hits only where the program leaves hits alone.

use crate::common;
use common::vcl::{start_vcl, with_origins};
use common::{Origin, Reply, Resp, Shellac, get, get_with};

/// `[vcl] file` in the TOML: the access log says which subroutine returned what, a reload
/// recompiles the file, and a VCL with errors keeps the running one.
#[tokio::test]
async fn config_file_log_and_reload() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=60")).await;
    let dir = common::temp_dir("vcl-reload");
    let vcl = |header: &str| {
        let text = format!(
            "vcl 4.1;\nbackend b {{ ${{origin0}} }}\n\
             sub vcl_deliver {{ set resp.http.x-version = \"{header}\"; }}\n"
        );
        with_origins(&text, &[origin.addr])
    };
    std::fs::write(dir.join("site.vcl"), vcl("one")).unwrap();
    let log = dir.join("access.log");
    let toml = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[vcl]\nfile = \"site.vcl\"\n\n\
         [log]\naccess_log = \"{}\"\nformat = \"%U %{{vcl}}x\"\n",
        log.display()
    );
    let conf = dir.join("shellac.toml");
    std::fs::write(&conf, toml).unwrap();
    let shellac = Shellac::start_reloadable(&conf).await;
    let r = get(shellac.addr, "/x").await;
    assert_eq!(r.header("x-version"), Some("one"));
    get(shellac.addr, "/x").await;
    let lines = common::wait_lines(&log, 2).await;
    assert_eq!(
        lines[0],
        "/x recv:hash hash:lookup miss:fetch backend_fetch:fetch backend_response:deliver deliver:deliver"
    );
    assert_eq!(
        lines[1],
        "/x recv:hash hash:lookup hit:deliver deliver:deliver"
    );

    // A VCL with an error: the reload is refused with the error, the old program runs on.
    std::fs::write(
        dir.join("site.vcl"),
        "vcl 4.1;\nbackend b { .host = \"h\"; }\nsub vcl_recv { set beresp.ttl = 1s; }\n",
    )
    .unwrap();
    let (status, body) = shellac.reload().await;
    assert_ne!(status, 200);
    let text = body.to_string();
    assert!(
        text.contains("site.vcl:3:16") && text.contains("Not available in subroutine 'vcl_recv'"),
        "{text}"
    );
    assert_eq!(
        get(shellac.addr, "/x").await.header("x-version"),
        Some("one")
    );

    std::fs::write(dir.join("site.vcl"), vcl("two")).unwrap();
    let (status, body) = shellac.reload().await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("compiled (VCL 4.1)"), "{body}");
    assert_eq!(
        get(shellac.addr, "/x").await.header("x-version"),
        Some("two")
    );
    shellac.stop().await;
}

/// The binary: `shellac check site.vcl` reports every error; `shellac serve --vcl` runs it.
#[tokio::test]
async fn check_and_serve_a_vcl_file() {
    use common::binary::{BIN, Served};
    let dir = common::temp_dir("vcl-cli");
    let bad = dir.join("bad.vcl");
    std::fs::write(
        &bad,
        "vcl 4.1;\nbackend b { .host = \"127.0.0.1\"; }\nsub vcl_recv {\n  set beresp.ttl = 1s;\n  return (deliver);\n}\nimport geoip2;\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .arg("check")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.vcl:4:3: 'beresp.ttl'"), "{err}");
    assert!(
        err.contains("bad.vcl:5:3: Invalid return \"deliver\""),
        "{err}"
    );
    assert!(
        err.contains("bad.vcl:7:1: not supported: Shellac has no VMOD 'geoip2'"),
        "{err}"
    );
    assert!(err.contains("3 errors"), "{err}");

    // A configuration naming the bad file: `check` reports the VCL's errors too, and the
    // [[backend]] given beside it.
    let conf = dir.join("shellac.toml");
    std::fs::write(
        &conf,
        "[vcl]\nfile = \"bad.vcl\"\n\n[[backend]]\nhost = \"127.0.0.1\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check", "--file-only"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[[backend]] cannot be given with [vcl] file"),
        "{err}"
    );
    std::fs::write(&conf, "[vcl]\nfile = \"bad.vcl\"\n").unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check", "--file-only"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.vcl:4:3: 'beresp.ttl'"), "{err}");
    assert!(err.contains("3 errors"), "{err}");

    let origin = Origin::start(|_| Reply::ok("from origin").cc("max-age=60")).await;
    let good = dir.join("good.vcl");
    let text =
        "vcl 4.1;\nbackend b { ${origin0} }\nsub vcl_deliver { set resp.http.x-vcl = \"yes\"; }\n";
    std::fs::write(&good, with_origins(text, &[origin.addr])).unwrap();
    let out = std::process::Command::new(BIN)
        .arg("check")
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("VCL 4.1; backends: b → "));
    let served = Served::serve(&[
        "--vcl",
        good.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
    ]);
    let r = get(served.proxy, "/").await;
    assert_eq!(r.text(), "from origin");
    assert_eq!(r.header("x-vcl"), Some("yes"));
    served.stop();
}

/// Fast hits under VCL: taken when the program provably changes nothing about a hit (its
/// vcl_recv only decides), declined when it would (a vcl_deliver, a header set in vcl_recv).
#[tokio::test]
async fn fast_hits_only_when_the_program_leaves_hits_alone() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=60")).await;
    let deciding = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url ~ "^/admin" || req.http.Cookie ~ "logged_in") { return (pass); }
    if (req.method == "GET" && req.url ~ "\.css$") { return (hash); }
}
sub vcl_backend_response { set beresp.ttl = 1h; }
"#;
    let shellac = start_vcl("fast", deciding, &[origin.addr]).await;
    let full = get(shellac.addr, "/a.css").await;
    let fast = get(shellac.addr, "/a.css").await;
    assert_eq!(shellac.stat("cache_hit_fast").await, 1);
    let fields = |r: &Resp| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = r
            .headers
            .iter()
            .filter(|(k, _)| !["date", "age", "cache-status", "x-varnish"].contains(&k.as_str()))
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        fields(&full),
        fields(&fast),
        "the same fields as the full path"
    );
    assert_eq!(fast.body, full.body);
    // Each its own X-Varnish: session 1000, request 1001, its fetch 1002; the second
    // connection 1003, its request 1004, a hit on what 1002 fetched.
    assert_eq!(full.header("x-varnish"), Some("1001"));
    assert_eq!(fast.header("x-varnish"), Some("1004 1002"));
    // A request vcl_recv passes is never a fast hit.
    get_with(shellac.addr, "/a.css", &[("cookie", "logged_in=1")]).await;
    assert_eq!(origin.count_path("/a.css"), 2);
    assert_eq!(shellac.stat("cache_hit_fast").await, 1);
    shellac.stop().await;

    // A vcl_deliver that adds fields: fast hits carry them; one that removes a field the
    // object has: every hit takes the full path.
    let adding = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
    unset resp.http.X-Powered-By;
    set resp.http.X-Frame-Options = "SAMEORIGIN";
}
"#;
    let shellac = start_vcl("fast-deliver", adding, &[origin.addr]).await;
    let miss = get(shellac.addr, "/b").await;
    assert_eq!(miss.header("x-cache"), Some("MISS"));
    let r = get(shellac.addr, "/b").await;
    assert_eq!(r.header("x-cache"), Some("HIT"));
    assert_eq!(r.header("x-frame-options"), Some("SAMEORIGIN"));
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        1,
        "added fields ride the fast path"
    );
    shellac.stop().await;
    let removing = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_deliver { unset resp.http.cache-control; }
"#;
    let shellac = start_vcl("fast-unset", removing, &[origin.addr]).await;
    get(shellac.addr, "/c").await;
    let r = get(shellac.addr, "/c").await;
    assert_eq!(r.header("cache-control"), None);
    assert_eq!(shellac.stat("cache_hit").await, 1);
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        0,
        "a removal takes the full path"
    );
    shellac.stop().await;
}

/// The fast hits' dry run of vcl_deliver treats Shellac's own stored fields as the full path
/// does (9c0f6d0): a read of `resp.http.shellac-*` leaves the hit to the full path, which
/// reads it as absent, and a set of one is refused there too — the full path fails it — so
/// no fast hit sends a forged field. A read of any other absent field keeps the hit fast.
#[tokio::test]
async fn the_fast_hit_dry_run_leaves_shellacs_own_fields_to_the_full_path() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path).cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_deliver {
    if (req.url == "/other") { set resp.http.x-seen = "[" + resp.http.x-absent + "]"; }
    if (req.url == "/read") { set resp.http.x-seen = "[" + resp.http.shellac-esi + "]"; }
    if (req.url == "/set") { set resp.http.shellac-identity = "forged"; }
}
"#;
    let shellac = start_vcl("fast-own-fields", vcl, &[origin.addr]).await;
    // (path, status, x-seen, fast hits after its hit)
    let cases = [
        ("/other", 200, Some("[]"), 1),
        ("/read", 200, Some("[]"), 1),
        ("/set", 503, None, 1),
    ];
    for (path, status, seen, fast) in cases {
        for round in ["miss", "hit"] {
            let r = get(shellac.addr, path).await;
            assert_eq!(r.status, status, "{path} {round}");
            assert_eq!(r.header("x-seen"), seen, "{path} {round}");
            assert_eq!(r.header("shellac-identity"), None, "{path} {round}");
        }
        assert_eq!(shellac.stat("cache_hit_fast").await, fast, "{path}");
    }
    assert_eq!(shellac.stat("cache_hit").await, 3);
    assert_eq!(origin.count(), 3);
    shellac.stop().await;
}
