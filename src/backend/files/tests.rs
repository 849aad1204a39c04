//! Tests of the files origin's answers as a whole (`Files::answer` on a temporary root): what
//! it refuses and how each refusal is marked. Apart from the files they test, so that no file
//! of the module imports `lookup.rs` back (ARCHITECTURE.md, "Layers").

use std::sync::Arc;

use http::{Method, Request, StatusCode};

use super::lookup::Files;
use super::refusal::Refusal;
use crate::backend::request_body::RequestBody;
use crate::config::BackendConfig;

/// By default a script, named or found as a directory's index, is a marked 404; with
/// `send_scripts` it is sent like any file.
#[tokio::test]
async fn a_script_is_refused_unless_the_backend_sends_scripts() {
    let root = std::env::temp_dir().join(format!("shellac-scripts-unit-{}", std::process::id()));
    std::fs::create_dir_all(root.join("blog")).unwrap();
    std::fs::write(root.join("x.php"), "<?php $password = 'secret';").unwrap();
    std::fs::write(root.join("blog/index.php"), "<?php echo 1;").unwrap();
    std::fs::write(root.join("x.phtml"), "<?php echo 2;").unwrap();
    std::fs::write(root.join("style.css"), "body {}").unwrap();
    let mut config = BackendConfig::new("files", "localhost", 0);
    config.root = Some(root.clone());
    config.index = Some(vec!["index.php".into(), "index.html".into()]);
    for send_scripts in [false, true] {
        config.send_scripts = send_scripts;
        let files = Arc::new(Files::new(&config));
        for path in [
            "/x.php",
            "/X.PHP",
            "/x%2ephp",
            "/x.php/b",
            "/x.phtml",
            "/blog/",
            "/style.css",
        ] {
            let req = Request::get(path).body(RequestBody::empty()).unwrap();
            let resp = files.answer(req).await;
            let refused = resp.extensions().get::<Refusal>() == Some(&Refusal::Script);
            let expected = !send_scripts && path != "/style.css";
            assert_eq!(refused, expected, "{path} send_scripts={send_scripts}");
            if expected {
                assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
            }
        }
        let req = Request::get("/x.php").body(RequestBody::empty()).unwrap();
        let status = files.answer(req).await.status();
        let sent = if send_scripts {
            StatusCode::OK
        } else {
            StatusCode::NOT_FOUND
        };
        assert_eq!(status, sent);
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// The files origin marks each refusal with its reason, and only refusals: a missing
/// file is a plain 404.
#[tokio::test]
async fn each_refusal_is_marked_with_its_reason() {
    use std::os::unix::fs::PermissionsExt;
    let base = std::env::temp_dir().join(format!("shellac-refusal-{}", std::process::id()));
    let root = base.join("www");
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(base.join("secret.txt"), "secret").unwrap();
    for name in ["a.txt", ".env", "x.php", "locked.txt"] {
        std::fs::write(root.join(name), "x").unwrap();
    }
    let locked = std::fs::Permissions::from_mode(0o000);
    std::fs::set_permissions(root.join("locked.txt"), locked).unwrap();
    std::os::unix::fs::symlink(base.join("secret.txt"), root.join("out.txt")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let mut config = BackendConfig::new("files", "localhost", 0);
    config.root = Some(root.clone());
    let files = Arc::new(Files::new(&config));
    let answer = |method: Method, path: &str| {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(RequestBody::empty())
            .unwrap();
        let files = files.clone();
        async move { files.answer(req).await }
    };
    for (method, path, want) in [
        (Method::POST, "/a.txt", Refusal::Method),
        (Method::GET, "/%2e%2e/secret.txt", Refusal::Traversal),
        (Method::GET, "/%c0%ae%c0%ae/secret.txt", Refusal::Encoding),
        (Method::GET, "/a%zz", Refusal::Encoding),
        (Method::GET, "/a.txt%00.js", Refusal::Control),
        (Method::GET, "/..%5csecret.txt", Refusal::Control),
        (Method::GET, "/a%2fb", Refusal::EscapedSlash),
        (Method::GET, "/.env", Refusal::Dotfile),
        (Method::GET, "/out.txt", Refusal::Symlink),
        (Method::GET, "/pipe", Refusal::Special),
        (Method::GET, "/empty/", Refusal::NoIndex),
        (Method::GET, "/x.php", Refusal::Script),
    ] {
        let resp = answer(method, path).await;
        assert_eq!(resp.extensions().get::<Refusal>(), Some(&want), "{path}");
        assert_eq!(resp.status(), want.status(), "{path}");
    }
    // Root reads every file (CAP_DAC_OVERRIDE); anyone else is refused it.
    let resp = answer(Method::GET, "/locked.txt").await;
    if resp.status() != StatusCode::OK {
        assert_eq!(
            resp.extensions().get::<Refusal>(),
            Some(&Refusal::Unreadable)
        );
    }
    for path in ["/a.txt", "/missing.txt", "/a.txt/"] {
        let resp = answer(Method::GET, path).await;
        assert!(resp.extensions().get::<Refusal>().is_none(), "{path}");
    }
    std::fs::remove_dir_all(&base).unwrap();
}
