//! A files backend never sends a PHP script's source unless it says so (`send_scripts`):
//! `/wp-config.php` routed to it is 404, counted in `files_script_refused`, in every spelling
//! a FastCGI origin would run, and so is a directory whose index is a script.

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
