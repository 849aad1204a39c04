//! An operator's `default_type` (nginx's `default_type`) end to end (issue 31): from the
//! configuration file, a file whose extension no table knows — or that has none — is sent
//! with the operator's type; unset, with the built-in `application/octet-stream`; known
//! extensions keep their own type; a reload that changes it is in force at once.

use super::common::*;

/// A configuration file serving `root`, with `extra` in its `[[backend]]`.
fn config(dir: &std::path::Path, root: &std::path::Path, extra: &str) {
    std::fs::write(
        dir.join("shellac.toml"),
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n\
             [[backend]]\nprotocol = \"files\"\nroot = \"{}\"\n{extra}",
            root.display()
        ),
    )
    .unwrap();
}

/// The `Content-Type` of `path?n`: each `n` a URL of its own, so no answer comes from the
/// cache and every one shows the files backend's configuration in force.
async fn type_of(sh: &Shellac, path: &str, n: u32) -> String {
    let r = get(sh.addr, &format!("{path}?{n}")).await;
    assert_eq!(r.status, 200, "{path}");
    r.header("content-type").unwrap_or("(none)").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_default_type_is_sent_for_unknown_extensions() {
    let dir = TempDir::new("default-type");
    let root = dir.0.join("www");
    std::fs::create_dir_all(&root).unwrap();
    for (name, body) in [
        ("notes.xyzzy", "text"),
        ("README", "text"),
        ("data.json", "{}"),
    ] {
        std::fs::write(root.join(name), body).unwrap();
    }
    // Unset: the built-in default.
    config(&dir.0, &root, "");
    let sh = Shellac::start_reloadable(&dir.0.join("shellac.toml")).await;
    assert_eq!(
        type_of(&sh, "/notes.xyzzy", 1).await,
        "application/octet-stream"
    );
    assert_eq!(type_of(&sh, "/README", 1).await, "application/octet-stream");
    sh.stop().await;
    // Set: the operator's, for an unknown extension and for none; `.json` keeps its own.
    config(
        &dir.0,
        &root,
        "default_type = \"text/plain; charset=utf-8\"\n",
    );
    let sh = Shellac::start_reloadable(&dir.0.join("shellac.toml")).await;
    assert_eq!(
        type_of(&sh, "/notes.xyzzy", 2).await,
        "text/plain; charset=utf-8"
    );
    assert_eq!(
        type_of(&sh, "/README", 2).await,
        "text/plain; charset=utf-8"
    );
    assert_eq!(type_of(&sh, "/data.json", 2).await, "application/json");
    // Changed by a reload: in force for the next request.
    config(&dir.0, &root, "default_type = \"text/markdown\"\n");
    let (status, v) = sh.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(type_of(&sh, "/notes.xyzzy", 3).await, "text/markdown");
    sh.stop().await;
}
