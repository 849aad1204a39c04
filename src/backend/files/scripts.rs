//! A files origin never sends a PHP script's source unless its backend says so
//! (`send_scripts = true`): a path with a segment named like a PHP script — `.php`, `.phtml`,
//! `.phar`, `.phps`, ... in any letter case, escaped or not, the family Debian's defaults
//! hand to PHP (`fastcgi/php.rs`, the one definition) — is answered `404` without a look at
//! the disk, and so is a script found another way
//! (a directory's `index`, a `try_files` entry). The answer carries `ScriptRefused`, which the
//! fetch step counts (`files_script_refused`: `proxy/fetch/send.rs`). A `try_files` ending in
//! `@NAME` hands such a path to `NAME` instead (`try_files.rs`).

use http::Response;
use http::StatusCode;

use super::path;
use crate::backend::source::{Source, plain_response};

/// Marks a files origin's `404` given because the path names a script.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScriptRefused;

/// The `404` for a script, marked to be counted.
pub(super) fn refused() -> Response<Source> {
    let mut resp = plain_response(StatusCode::NOT_FOUND);
    resp.extensions_mut().insert(ScriptRefused);
    resp
}

/// Whether `raw` (the request path, still escaped) has a segment named like a PHP script —
/// any letter case, escaped or not (`/a.PHP`, `/a%2ephtml/x`). A path the files origin
/// refuses anyway (`..`, a bad escape) is left to that refusal.
pub(super) fn names_a_script(raw: &str) -> bool {
    path::parse(raw, true).is_ok_and(|names| names.names.iter().any(|n| is_script(n)))
}

/// Whether the file name `name` (decoded) is a PHP script's.
pub(super) fn is_script(name: &str) -> bool {
    crate::fastcgi::php::is_php_name(name)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::{Request, StatusCode};

    use super::{ScriptRefused, names_a_script};
    use crate::backend::files::lookup::Files;
    use crate::backend::request_body::RequestBody;
    use crate::config::BackendConfig;

    #[test]
    fn script_paths_are_the_php_family_in_any_spelling() {
        for raw in [
            "/wp-config.php",
            "/index.PHP",
            "/a/b.php/extra/path",
            "/uploads/evil.jpg/x.php",
            "/x%2ephp",
            "/a.phps",
            "/a.PhTmL",
            "/lib/app.phar/x",
            "/old.php5",
            "/old%2Epht",
            "/.php",
        ] {
            assert!(names_a_script(raw), "{raw}");
        }
        for raw in ["/", "/style.css", "/php/", "/a.php.bak", "/%2e%2e/a.php"] {
            assert!(!names_a_script(raw), "{raw}");
        }
    }

    /// By default a script, named or found as a directory's index, is a marked 404; with
    /// `send_scripts` it is sent like any file.
    #[tokio::test]
    async fn a_script_is_refused_unless_the_backend_sends_scripts() {
        let root =
            std::env::temp_dir().join(format!("shellac-scripts-unit-{}", std::process::id()));
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
                let refused = resp.extensions().get::<ScriptRefused>().is_some();
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
}
