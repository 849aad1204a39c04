//! A files backend never sends a PHP script's source unless it says so (`send_scripts`):
//! `/wp-config.php` routed to it is 404, counted in `files_script_refused`, in every spelling
//! and for the whole PHP family (`.phtml`, `.phar`, `.phps`, `.php5` ...), and so is a
//! directory whose index is a script.

use super::*;

const PASSWORD: &str = "DB-PASSWORD-IN-WP-CONFIG";

/// The site with a WordPress-like config script and a directory whose index is a script.
fn scripts_site() -> TempDir {
    let dir = site();
    let www = dir.0.join("www");
    std::fs::write(
        www.join("wp-config.php"),
        format!("<?php define('DB_PASSWORD', '{PASSWORD}');\n"),
    )
    .unwrap();
    std::fs::create_dir_all(www.join("blog")).unwrap();
    std::fs::write(www.join("blog/index.php"), format!("<?php // {PASSWORD}\n")).unwrap();
    dir
}

/// Passed (`X-Pass: 1`), so every request reaches the files origin, never a cached 404.
async fn passed(addr: std::net::SocketAddr, target: &str) -> (u16, String) {
    let text = raw(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nX-Pass: 1\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await;
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

const SCRIPTS: [&str; 5] = [
    "/wp-config.php",
    "/WP-CONFIG.PHP",
    "/wp-config%2ephp",
    "/wp-config.php/extra",
    "/blog/",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_is_never_sent_by_default_and_counted() {
    let dir = scripts_site();
    let sh = files(&dir.0.join("www"), |b| {
        b.index = Some(vec!["index.php".into(), "index.html".into()]);
    })
    .await;
    for target in SCRIPTS {
        let (status, text) = passed(sh.addr, target).await;
        assert_eq!(status, 404, "{target}\n{text}");
        assert!(!text.contains(PASSWORD), "{target} sent the script");
    }
    // Other files are served as before, and not counted.
    assert_eq!(passed(sh.addr, "/style.css").await.0, 200);
    assert_eq!(passed(sh.addr, "/docs/").await.0, 200);
    assert_eq!(sh.stat("files_script_refused").await, SCRIPTS.len() as u64);
    let metrics = get(sh.admin, "/metrics").await.text();
    assert!(
        metrics.contains(&format!(
            "shellac_files_script_refused_total {}",
            SCRIPTS.len()
        )),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_scripts_sends_them_as_files() {
    let dir = scripts_site();
    let sh = files(&dir.0.join("www"), |b| {
        b.index = Some(vec!["index.php".into(), "index.html".into()]);
        b.send_scripts = true;
    })
    .await;
    for target in ["/wp-config.php", "/wp-config%2ephp", "/blog/"] {
        let (status, text) = passed(sh.addr, target).await;
        assert_eq!(status, 200, "{target}\n{text}");
        assert!(text.contains(PASSWORD), "{target}\n{text}");
    }
    // No such file: a plain 404, not a refusal.
    assert_eq!(passed(sh.addr, "/wp-config.php/extra").await.0, 404);
    assert_eq!(sh.stat("files_script_refused").await, 0);
}

/// Every name Debian's defaults hand to PHP (`src/fastcgi/php.rs`), in any case and escaped.
const FAMILY: [&str; 11] = [
    "a.phtml", "a.phar", "a.phps", "a.pht", "a.php3", "a.php4", "a.php5", "a.php6", "a.php7",
    "a.php8", "a.PhTmL",
];

/// `.phtml`, `.phar`, `.phps`, `.php5` ... are scripts as `.php` is: 404 and counted by
/// default, whatever the spelling; a `try_files` ending in `@NAME` hands them to `NAME`
/// without a look at the disk; `send_scripts` sends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_php_family_is_a_script() {
    let dir = scripts_site();
    let www = dir.0.join("www");
    for name in FAMILY {
        std::fs::write(www.join(name), format!("<?php // {PASSWORD} {name}\n")).unwrap();
    }
    std::fs::write(www.join("a.php.bak"), "backup").unwrap();
    std::fs::write(www.join("a.php.txt"), "published as text").unwrap();
    let sh = files(&www, |_| {}).await;
    let mut refused = 0u64;
    for name in FAMILY {
        let escaped = name.replace('.', "%2e");
        for target in [
            format!("/{name}"),
            format!("/{escaped}"),
            format!("/{name}/x"),
        ] {
            let (status, text) = passed(sh.addr, &target).await;
            assert_eq!(status, 404, "{target}\n{text}");
            assert!(!text.contains(PASSWORD), "{target} sent the script");
            refused += 1;
        }
    }
    // Not a script: its last extension is not PHP's. A backup is a copy (`copies.rs`),
    // refused and counted apart; a `.txt` is published on purpose.
    assert_eq!(passed(sh.addr, "/a.php.bak").await.0, 404);
    assert_eq!(passed(sh.addr, "/a.php.txt").await.0, 200);
    assert_eq!(sh.stat("files_script_refused").await, refused);
    assert_eq!(sh.stat("files_refused_script_copy").await, 1);
    sh.stop().await;

    // try_files ending in @app: the script goes to app, unread.
    let app = Origin::start(|s| Reply::ok(&format!("app ran {}", s.path)).cc("no-store")).await;
    let app_addr = app.addr;
    let sh = Shellac::start_files(&www, |c| {
        c.backends[0].try_files = ["$uri", "@app"].map(String::from).to_vec();
        c.backends.push(shellac::config::BackendConfig::new(
            "app",
            &app_addr.ip().to_string(),
            app_addr.port(),
        ));
        c.rules.push(pass_rule());
    })
    .await;
    for target in ["/a.phtml", "/a%2EPHAR", "/a.php5/x"] {
        let (status, text) = passed(sh.addr, target).await;
        assert_eq!(status, 200, "{target}\n{text}");
        assert!(text.ends_with(&format!("app ran {target}")), "{text}");
    }
    // A script's copy is not handed on (PHP would not run it): refused.
    let (status, text) = passed(sh.addr, "/a.php.bak").await;
    assert_eq!(status, 404, "{text}");
    assert_eq!(sh.stat("files_refused_script_copy").await, 1);
    assert_eq!(app.count(), 3);
    assert_eq!(sh.stat("files_try_next").await, 3);
    assert_eq!(sh.stat("files_script_refused").await, 0);
    sh.stop().await;

    let sh = files(&www, |b| b.send_scripts = true).await;
    for name in FAMILY {
        let (status, text) = passed(sh.addr, &format!("/{name}")).await;
        assert_eq!(status, 200, "{name}\n{text}");
        assert!(text.contains(PASSWORD), "{name}");
    }
    assert_eq!(sh.stat("files_script_refused").await, 0);
}

/// `shellac check` warns (and still passes) when a files backend and a FastCGI backend share
/// a root and nothing sends script paths to the FastCGI one; a rule doing so silences it.
#[test]
fn check_warns_when_nothing_sends_scripts_to_php() {
    let dir = TempDir::new("scripts-check");
    let www = dir.0.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let file = dir.0.join("shellac.toml");
    let base = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\n\n[[backend]]\nname = \"static\"\nprotocol = \"files\"\nroot = \"{root}\"\n\n[[backend]]\nname = \"php\"\nprotocol = \"fastcgi\"\nhost = \"127.0.0.1\"\nport = 9000\nmax_connections = 2\nroot = \"{root}/\"\n",
        root = www.display()
    );
    let check = |text: &str| {
        std::fs::write(&file, text).unwrap();
        let out = Command::new(BIN)
            .args(["check", file.to_str().unwrap()])
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), all)
    };
    let (ok, all) = check(&base);
    assert!(ok, "a warning, not an error\n{all}");
    assert!(all.contains(":8:1: `backend.0.root`:"), "{all}");
    assert!(
        all.contains("backend `php` (FastCGI) serves this root too"),
        "{all}"
    );
    let routed = format!("{base}\n[[rule]]\npath = '\\.php($|/)'\ndirector = \"php\"\n");
    let (ok, all) = check(&routed);
    assert!(ok, "{all}");
    assert!(!all.contains("serves this root too"), "{all}");
}
