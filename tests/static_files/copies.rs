//! No copy of a PHP script leaves a files backend by default (`send_scripts = false`):
//! editor backups, saved and compressed copies (`wp-config.php~`, `#wp-config.php#`,
//! `wp-config.php.bak`, `.swp`, `.gz` ...) are 404, counted in `files_refused_script_copy`,
//! and left out of listings; a symbolic link with another name (`a.txt -> wp-config.php`) is
//! refused as what it leads to; `/wp-config.php` never gets its `.gz` sibling.

use super::*;

const PASSWORD: &str = "DB-PASSWORD-IN-WP-CONFIG";

/// Copies of `wp-config.php` as editors, tools and people leave them, each with the request
/// path that names it.
const COPIES: [(&str, &str); 19] = [
    ("wp-config.php~", "/wp-config.php~"),
    ("#wp-config.php#", "/%23wp-config.php%23"),
    ("wp-config.php.bak", "/wp-config.php.bak"),
    ("wp-config.PHP.BAK", "/wp-config.PHP.BAK"),
    ("wp-config.php.old", "/wp-config.php.old"),
    ("wp-config.php.orig", "/wp-config.php.orig"),
    ("wp-config.php.save", "/wp-config.php.save"),
    ("wp-config.php.save.1", "/wp-config.php.save.1"),
    ("wp-config.php.~1~", "/wp-config.php.~1~"),
    (".wp-config.php.swp", "/.wp-config.php.swp"),
    ("wp-config.php.swo", "/wp-config.php.swo"),
    ("wp-config.php.tmp", "/wp-config.php.tmp"),
    ("wp-config.php.dist", "/wp-config.php.dist"),
    ("wp-config.php.gz", "/wp-config.php.gz"),
    ("wp-config.php.br", "/wp-config.php.br"),
    ("wp-config.php.zst", "/wp-config.php.zst"),
    ("wp-config.php.zip", "/wp-config.php.zip"),
    ("wp-config.php.tar.gz", "/wp-config.php.tar.gz"),
    ("wp-config.php_old", "/wp-config%2ephp_old"),
];

/// Names with `php` in them that are no script's copy: served.
const SERVED: [&str; 3] = ["php.ini.txt", "notes.php.txt", "php-fpm.conf"];

/// The site with `wp-config.php` and its copies; `.swp` is a dotfile, so dotfiles are served
/// here to show that the copy refusal holds on its own.
fn copies_site() -> TempDir {
    let dir = site();
    let www = dir.0.join("www");
    let script = format!("<?php define('DB_PASSWORD', '{PASSWORD}');\n");
    std::fs::write(www.join("wp-config.php"), &script).unwrap();
    for (name, _) in COPIES {
        std::fs::write(www.join(name), &script).unwrap();
    }
    for name in SERVED {
        std::fs::write(www.join(name), "plain text").unwrap();
    }
    dir
}

/// Every copy is 404 and counted in `files_refused_script_copy` (in /stats and /metrics),
/// never as a script; names that merely hold `php` are served; `/wp-config.php` asked for
/// with every coding gets no sibling; `send_scripts` sends the copies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_scripts_are_refused_and_counted() {
    let dir = copies_site();
    let www = dir.0.join("www");
    let sh = files(&www, |b| b.dotfiles = true).await;
    for (name, target) in COPIES {
        let r = get_with(sh.addr, target, &[PASS]).await;
        assert_eq!(r.status, 404, "{name}");
        assert!(!r.text().contains(PASSWORD), "{name} was sent");
    }
    for name in SERVED {
        let r = get_with(sh.addr, &format!("/{name}"), &[PASS]).await;
        assert_eq!(r.status, 200, "{name}");
    }
    // A precompressed sibling of a script is never its answer.
    let r = get_with(
        sh.addr,
        "/wp-config.php",
        &[PASS, ("accept-encoding", "gzip, br, zstd")],
    )
    .await;
    assert_eq!(r.status, 404);
    assert!(!r.text().contains(PASSWORD));
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(
        sh.stat("files_refused_script_copy").await,
        COPIES.len() as u64
    );
    assert_eq!(sh.stat("files_script_refused").await, 1);
    assert_eq!(sh.stat("files_refused_dotfile").await, 0);
    let metrics = get(sh.admin, "/metrics").await.text();
    assert!(
        metrics.contains(&format!(
            "shellac_files_refused_script_copy_total {}",
            COPIES.len()
        )),
        "{metrics}"
    );
    sh.stop().await;

    // Without dotfiles, the vim swap file is refused as a dotfile first.
    let sh = files(&www, |_| {}).await;
    assert_eq!(
        get_with(sh.addr, "/.wp-config.php.swp", &[PASS])
            .await
            .status,
        404
    );
    assert_eq!(sh.stat("files_refused_dotfile").await, 1);
    assert_eq!(sh.stat("files_refused_script_copy").await, 0);
    sh.stop().await;

    let sh = files(&www, |b| {
        b.dotfiles = true;
        b.send_scripts = true;
    })
    .await;
    for (name, target) in COPIES {
        let r = get_with(sh.addr, target, &[PASS]).await;
        assert_eq!(r.status, 200, "{name}");
        assert!(r.text().contains(PASSWORD), "{name}");
    }
    assert_eq!(sh.stat("files_refused_script_copy").await, 0);
    sh.stop().await;
}

/// A symbolic link inside the root with another name is refused as what it leads to — a
/// script, a script's copy, a directory named like a script, an index that is a script, a
/// script outside the root (`follow_symlinks`) — and a precompressed sibling that is such a
/// link is never chosen; a listing leaves such links out. `send_scripts` sends and lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_with_another_name_is_refused_as_what_it_leads_to() {
    use std::os::unix::fs::symlink;
    let dir = copies_site();
    let www = dir.0.join("www");
    let links = www.join("links");
    std::fs::create_dir_all(www.join("app.phar")).unwrap();
    std::fs::write(www.join("app.phar/readme.txt"), PASSWORD).unwrap();
    std::fs::create_dir_all(links.join("blog")).unwrap();
    std::fs::write(www.join("index.php"), PASSWORD).unwrap();
    std::fs::write(dir.0.join("outside.php"), PASSWORD).unwrap();
    symlink(www.join("wp-config.php"), links.join("a.txt")).unwrap();
    symlink(www.join("wp-config.php.bak"), links.join("b.txt")).unwrap();
    symlink(www.join("app.phar"), links.join("lib")).unwrap();
    symlink(www.join("index.php"), links.join("blog/index.html")).unwrap();
    symlink(dir.0.join("outside.php"), links.join("out.txt")).unwrap();
    symlink(www.join("text.txt"), links.join("fine.txt")).unwrap();
    std::fs::write(links.join("page.css"), "body{}").unwrap();
    symlink(www.join("wp-config.php"), links.join("page.css.gz")).unwrap();

    // (path, refused by default, its answer is the script's bytes when sent)
    let asked: [(&str, bool, bool); 7] = [
        ("/links/a.txt", true, true),
        ("/links/b.txt", true, true),
        ("/links/lib/readme.txt", true, true),
        ("/links/blog/", true, true),
        ("/links/out.txt", true, true),
        ("/links/fine.txt", false, false),
        // Its `.gz` sibling is a link to the script: never chosen by default.
        ("/links/page.css", false, true),
    ];
    for send_scripts in [false, true] {
        let sh = files(&www, |b| {
            b.autoindex = true;
            b.follow_symlinks = true;
            b.send_scripts = send_scripts;
        })
        .await;
        for (target, refused, script) in asked {
            let r = get_with(sh.addr, target, &[PASS, ("accept-encoding", "gzip")]).await;
            let expect = if refused && !send_scripts { 404 } else { 200 };
            assert_eq!(r.status, expect, "{target} (send_scripts: {send_scripts})");
            assert_eq!(
                r.text().contains(PASSWORD),
                script && send_scripts,
                "{target} (send_scripts: {send_scripts})"
            );
        }
        // The sibling that is a link to the script is no sibling; with `send_scripts` it is
        // one (the operator said the scripts are files to send).
        let page = get_with(
            sh.addr,
            "/links/page.css",
            &[PASS, ("accept-encoding", "gzip")],
        )
        .await;
        assert_eq!(
            page.header("content-encoding").is_some(),
            send_scripts,
            "send_scripts: {send_scripts}"
        );
        let (scripts, copies) = if send_scripts { (0, 0) } else { (4, 1) };
        assert_eq!(sh.stat("files_script_refused").await, scripts);
        assert_eq!(sh.stat("files_refused_script_copy").await, copies);

        let listing = get_with(sh.addr, "/links/", &[PASS]).await.text();
        for name in ["fine.txt", "page.css", "blog/"] {
            assert!(
                listing.contains(&format!("href=\"{name}\"")),
                "{name}\n{listing}"
            );
        }
        for name in ["a.txt", "b.txt", "lib/", "out.txt", "page.css.gz"] {
            assert_eq!(
                listing.contains(&format!("href=\"{name}\"")),
                send_scripts,
                "{name} (send_scripts: {send_scripts})\n{listing}"
            );
        }
        // And the root's own listing leaves the copies out.
        let root = get_with(sh.addr, "/", &[PASS]).await.text();
        assert!(root.contains("href=\"php.ini.txt\""), "{root}");
        assert_eq!(
            root.contains("href=\"wp-config.php.bak\""),
            send_scripts,
            "{root}"
        );
        sh.stop().await;
    }
}

/// A script's copy under a name no list knows (`wp-config.backup`, `index.php.before-update`) is known
/// by its first bytes — `<?php`, after a byte-order mark and whitespace too, or `<?=` — and
/// refused as a named copy is: 404 without a byte of it, counted in
/// `files_refused_script_source` (in /stats and /metrics), left out of a listing. A text that
/// merely mentions PHP later, or an XML file (`<?xml`), is served; `sniff_scripts = false` and
/// `send_scripts = true` each send the copies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_under_an_invented_name_is_refused_by_its_first_bytes() {
    let dir = site();
    let www = dir.0.join("www");
    let script = format!("<?php define('DB_PASSWORD', '{PASSWORD}');\n");
    let refused: [(&str, String); 4] = [
        ("wp-config.backup", script.clone()),
        ("index.php.before-update", script.clone()),
        (
            "settings.inc",
            format!("\u{feff}\r\n  <?PHP\n$p = '{PASSWORD}';"),
        ),
        ("header.tpl", format!("<?= '{PASSWORD}' ?>")),
    ];
    for (name, body) in &refused {
        std::fs::write(www.join(name), body).unwrap();
    }
    let served = [
        (
            "notes.txt",
            format!("How the site works: wp-config.php holds <?php define(...); {PASSWORD}"),
        ),
        (
            "feed.xml",
            format!("<?xml version=\"1.0\"?><a>{PASSWORD}</a>"),
        ),
    ];
    for (name, body) in &served {
        std::fs::write(www.join(name), body).unwrap();
    }

    let sh = files(&www, |b| b.autoindex = true).await;
    for (name, _) in &refused {
        let r = get_with(sh.addr, &format!("/{name}"), &[PASS]).await;
        assert_eq!(r.status, 404, "{name}");
        assert!(!r.text().contains(PASSWORD), "{name} was sent");
    }
    for (name, body) in &served {
        let r = get_with(sh.addr, &format!("/{name}"), &[PASS]).await;
        assert_eq!(r.status, 200, "{name}");
        assert_eq!(&r.text(), body, "{name}");
    }
    assert_eq!(
        sh.stat("files_refused_script_source").await,
        refused.len() as u64
    );
    assert_eq!(sh.stat("files_refused_script_copy").await, 0);
    assert_eq!(sh.stat("files_script_refused").await, 0);
    let metrics = get(sh.admin, "/metrics").await.text();
    assert!(
        metrics.contains(&format!(
            "shellac_files_refused_script_source_total {}",
            refused.len()
        )),
        "{metrics}"
    );
    let listing = get_with(sh.addr, "/", &[PASS]).await.text();
    for (name, _) in &refused {
        assert!(!listing.contains(&format!("href=\"{name}\"")), "{listing}");
    }
    for (name, _) in &served {
        assert!(listing.contains(&format!("href=\"{name}\"")), "{listing}");
    }
    sh.stop().await;

    for (sniff, send) in [(false, false), (true, true)] {
        let sh = files(&www, |b| {
            b.sniff_scripts = sniff;
            b.send_scripts = send;
        })
        .await;
        for (name, body) in &refused {
            let r = get_with(sh.addr, &format!("/{name}"), &[PASS]).await;
            assert_eq!(r.status, 200, "{name} (sniff {sniff}, send {send})");
            assert_eq!(&r.text(), body, "{name}");
        }
        assert_eq!(sh.stat("files_refused_script_source").await, 0);
        sh.stop().await;
    }
}
