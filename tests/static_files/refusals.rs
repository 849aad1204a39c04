//! The refusals that keep requests inside the root: traversal in every spelling, symlinks out
//! and dotfiles only when the operator says, unreadable and special files, each counted by
//! its reason, and `shellac check` refusing a bad root or socket.

use super::*;

/// Raw request lines, so no client library tidies the path first.
pub(super) async fn raw_status(addr: std::net::SocketAddr, target: &str) -> (u16, String) {
    let text = raw(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traversal_in_every_spelling_never_leaves_the_root() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |_| {}).await;
    for target in [
        "/../secret.txt",
        "/docs/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/.%2e/secret.txt",
        "/docs/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/%c0%ae%c0%ae/secret.txt",
        "/docs/..%c0%af..%c0%afsecret.txt",
        "/%e0%80%ae%e0%80%ae/secret.txt",
        "/..%5csecret.txt",
        "/docs\\..\\..\\secret.txt",
        "/docs%5c..%5c..%5csecret.txt",
        "/text.txt%00.js",
        "/text%0a.txt",
        "/text.txt%2f",
        "/escape.txt",
    ] {
        let (status, text) = raw_status(sh.addr, target).await;
        assert!(status == 400 || status == 404, "{target}: {status}\n{text}");
        assert!(!text.contains(SECRET), "{target} leaked the file");
    }
    // A link that stays inside the root is followed.
    assert_eq!(raw_status(sh.addr, "/inside.txt").await.0, 200);
    // Dotfiles are not served; .well-known is.
    assert_eq!(raw_status(sh.addr, "/.env").await.0, 404);
    assert_eq!(raw_status(sh.addr, "/%2eenv").await.0, 404);
    assert_eq!(
        raw_status(sh.addr, "/.well-known/security.txt").await.0,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_out_and_dotfiles_only_when_the_operator_says() {
    let dir = site();
    let sh = files(&dir.0.join("www"), |b| {
        b.follow_symlinks = true;
        b.dotfiles = true;
    })
    .await;
    let r = get(sh.addr, "/escape.txt").await;
    assert_eq!((r.status, r.text().as_str()), (200, SECRET));
    assert_eq!(get(sh.addr, "/.env").await.status, 200);
    // Still never `..`.
    assert_eq!(raw_status(sh.addr, "/../secret.txt").await.0, 400);
}

/// A file this process cannot read is 403, and a listing leaves it out. Run as root (CAP_DAC_OVERRIDE), every file is
/// readable: the case is then made by a FIFO, which is never served (404) and never blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_files_and_special_files_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = site();
    let www = dir.0.join("www");
    let locked = www.join("locked.txt");
    std::fs::write(&locked, "x").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    // A directory listed: what this process cannot open is left out of it.
    let list = www.join("list");
    std::fs::create_dir_all(list.join("shut")).unwrap();
    std::fs::write(list.join("open.txt"), "o").unwrap();
    std::fs::write(list.join("locked.txt"), "x").unwrap();
    for name in ["shut", "locked.txt"] {
        let mode = std::fs::Permissions::from_mode(0o000);
        std::fs::set_permissions(list.join(name), mode).unwrap();
    }
    let fifo = www.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let sh = files(&www, |_| {}).await;
    let status = get(sh.addr, "/locked.txt").await.status;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(status, 200, "root reads every file");
        // The same file served by a Shellac that is not root (as a packaged one runs): 403.
        if let Some(setpriv) = tools::require(tools::which("setpriv"), "setpriv", "util-linux") {
            let config = dir.0.join("nobody.toml");
            std::fs::write(
                &config,
                format!(
                    "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[[backend]]\nprotocol = \"files\"\nroot = \"{}\"\nautoindex = true\n",
                    www.display()
                ),
            )
            .unwrap();
            let mut cmd = Command::new(setpriv);
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
                .args(["serve", "--config"])
                .arg(&config);
            let served = common::binary::Served::start(cmd);
            assert_eq!(get(served.proxy, "/locked.txt").await.status, 403);
            assert_eq!(get(served.proxy, "/text.txt").await.status, 200);
            unreadable_entries_are_not_listed(served.proxy).await;
            let metrics = get(served.admin, "/metrics").await.text();
            assert!(
                metrics.contains("shellac_files_refused_unreadable_total 3\n"),
                "{metrics}"
            );
            served.stop();
        }
    } else {
        assert_eq!(status, 403);
        let listing = files(&www, |b| b.autoindex = true).await;
        unreadable_entries_are_not_listed(listing.addr).await;
        assert_eq!(listing.stat("files_refused_unreadable").await, 2);
    }
    assert_eq!(get(sh.addr, "/pipe").await.status, 404);
    assert_eq!(sh.stat("files_refused_special").await, 1);
}

/// `/list/` as listed by a Shellac that may not read `locked.txt` nor read `shut/`: neither
/// is listed (their links would be 403), `open.txt` is and is served; asked for anyway,
/// both are refused 403 (two `files_refused_unreadable`).
async fn unreadable_entries_are_not_listed(proxy: std::net::SocketAddr) {
    let r = get_with(proxy, "/list/", &[PASS]).await;
    let page = r.text();
    assert_eq!(r.status, 200, "{page}");
    assert!(page.contains("href=\"open.txt\""), "{page}");
    assert!(
        !page.contains("locked"),
        "an unreadable file is not listed\n{page}"
    );
    assert!(
        !page.contains("shut"),
        "an unreadable directory is not listed\n{page}"
    );
    assert_eq!(get(proxy, "/list/open.txt").await.status, 200);
    assert_eq!(
        get_with(proxy, "/list/locked.txt", &[PASS]).await.status,
        403
    );
    assert_eq!(get_with(proxy, "/list/shut/", &[PASS]).await.status, 403);
}

/// Every refusal is counted under its reason, in `/stats` and `/metrics`; a file that is
/// simply not there is no refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_is_counted_by_its_reason() {
    let dir = site();
    let www = dir.0.join("www");
    std::fs::write(www.join("wp-config.php"), "<?php // secret").unwrap();
    let fifo = Command::new("mkfifo")
        .arg(www.join("pipe"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let sh = files(&www, |_| {}).await;
    // (request line's method and target, status, counter): each target once, so none is
    // answered from a stored copy.
    let cases: [(&str, &str, u16, &str); 14] = [
        ("POST", "/app.js", 405, "files_refused_method"),
        ("DELETE", "/text.txt", 405, "files_refused_method"),
        ("GET", "/%2e%2e/secret.txt", 400, "files_refused_traversal"),
        (
            "GET",
            "/docs/../../secret.txt",
            400,
            "files_refused_traversal",
        ),
        (
            "GET",
            "/%c0%ae%c0%ae/secret.txt",
            400,
            "files_refused_encoding",
        ),
        ("GET", "/text%ff.txt", 400, "files_refused_encoding"),
        ("GET", "/text.txt%00.js", 400, "files_refused_control"),
        ("GET", "/..%5csecret.txt", 400, "files_refused_control"),
        (
            "GET",
            "/docs%2findex.html",
            404,
            "files_refused_escaped_slash",
        ),
        ("GET", "/.env", 404, "files_refused_dotfile"),
        ("GET", "/escape.txt", 404, "files_refused_symlink"),
        ("GET", "/pipe", 404, "files_refused_special"),
        ("GET", "/empty/", 403, "files_refused_no_index"),
        ("GET", "/wp-config.php", 404, "files_script_refused"),
    ];
    for (method, target, status, _) in cases {
        let text = raw(
            sh.addr,
            format!("{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
        let got: u16 = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        assert_eq!(got, status, "{method} {target}\n{text}");
        assert!(!text.contains(SECRET), "{target} leaked the file");
    }
    // Not refusals: a file that is not there, a file served.
    assert_eq!(raw_status(sh.addr, "/missing.txt").await.0, 404);
    assert_eq!(raw_status(sh.addr, "/inside.txt").await.0, 200);
    let metrics = get(sh.admin, "/metrics").await.text();
    let mut counters: Vec<&str> = cases.iter().map(|c| c.3).collect();
    counters.dedup();
    for counter in counters {
        let want = cases.iter().filter(|c| c.3 == counter).count() as u64;
        assert_eq!(sh.stat(counter).await, want, "{counter}");
        let line = format!("shellac_{counter}_total {want}\n");
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
    assert_eq!(sh.stat("files_refused_unreadable").await, 0);
}

/// `shellac check` names the key and line of a document root that is not a directory and of
/// a Unix socket path whose directory does not exist.
#[test]
fn check_refuses_a_bad_root_and_socket() {
    let dir = TempDir::new("files-check");
    let file = dir.0.join("shellac.toml");
    std::fs::write(dir.0.join("plain"), "x").unwrap();
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\n\n[[backend]]\nname = \"static\"\nprotocol = \"files\"\nroot = \"{}\"\n\n[[backend]]\nname = \"app\"\naddress = \"unix:/nonexistent-dir/app.sock\"\n",
        dir.0.join("plain").display()
    );
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
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains(":8:1: `backend.0.root`: document root"),
        "{all}"
    );
    assert!(all.contains("is not a directory"), "{all}");
    assert!(all.contains(":12:1: `backend.1.address`:"), "{all}");
    assert!(all.contains("does not exist"), "{all}");
}
