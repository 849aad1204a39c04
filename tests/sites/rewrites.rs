//! What a `rewrite` regex meets and what its captures become, as nginx: the decoded,
//! slash-merged `$uri` with dot segments removed, captures escaped again where they land
//! (docs/sites.md "Rewrites"), and never a way out of a files root.

use super::*;

/// nginx matches `$uri`: `^/café/` and `"^/a b$"` match `/caf%c3%a9/` and `/a%20b`, `//old//`
/// is `/old/`; a capture that holds a `?` or a space goes back as `%3F` / `%20` in a path
/// (nginx's rewrite_unescape.t "escaped $1", which nginx itself lists as not yet done) and a
/// `+` or `&` as `%2B` / `%26` in a query (so PHP reads `A+B&C` as one value, not `A B`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrites_match_the_decoded_uri_and_escape_what_they_put_back() {
    let a = named("a").await;
    let dir = temp_dir("sites-rewrite-uri");
    let root = dir.join("www");
    std::fs::create_dir_all(root.join("pub").join("a")).unwrap();
    write(&root.join("secret.txt"), "outside pub");
    write(&root.join("pub").join("secret.txt"), "in pub");
    write(&root.join("pub").join("a").join("b.txt"), "a/b in pub");
    let text = format!(
        r#"[server]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
{}
[[backend]]
name = "static"
protocol = "files"
root = "{}"
[routing]
default = "a"
rewrite = ['^/café/(.*)$ /coffee/$1', '"^/a b$" /ab', '^/old/(.*)$ /new/$1 permanent', '^/wiki/(.*)$ /index.php?title=$1 last', '^/u/ http://example.com$uri redirect']
[[site]]
name = "files"
server_name = "files.test"
backend = "static"
rewrite = ['^/(.*)$ /pub/$1 break']
[[site]]
name = "plain"
default = true
"#,
        backend("a", &a),
        root.display()
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    let mut conn = Conn::open(addr).await;
    let r = conn.send("GET", "/caf%c3%a9/x%20y", &[], b"").await;
    assert_eq!(r.text(), "a /coffee/x%20y");
    let r = conn.send("GET", "/a%20b", &[], b"").await;
    assert_eq!(r.text(), "a /ab");
    let r = conn
        .send("GET", "//old//blah%20%3Fblah?x=1", &[], b"")
        .await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/new/blah%20%3Fblah?x=1"));
    let r = conn.send("GET", "/wiki/A+B%26C", &[], b"").await;
    assert_eq!(r.text(), "a /index.php?title=A%2BB%26C");
    // `$uri` is the decoded path, escaped again (rewrite_unescape.t "escaped $uri").
    let r = conn.send("GET", "/u/blah%20%3Fblah", &[], b"").await;
    assert_eq!(r.status, 302);
    assert_eq!(
        r.header("location"),
        Some("http://example.com/u/blah%20%3Fblah")
    );
    // A path no rewrite matches goes on as it came.
    let r = conn.send("GET", "/caf%C3%A9", &[], b"").await;
    assert_eq!(r.text(), "a /caf%C3%A9");

    // Into a files root: dot segments go after decoding, never above `/`, so no capture
    // holds a `..` and `pub/`'s parent is out of reach however it is spelled.
    for path in [
        "/secret.txt",
        "/%2E%2E/secret.txt",
        "/%2e%2e%2fsecret.txt",
        "/x%2F..%2F..%2Fsecret.txt",
        "/a/%2E%2E/%2E%2E/secret.txt",
    ] {
        let r = get_host(addr, "files.test", path).await;
        assert_eq!((r.status, r.text().as_str()), (200, "in pub"), "{path}");
    }
    // A decoded `%2F` is a slash, as in nginx's `$uri`.
    let r = get_host(addr, "files.test", "/a%2Fb.txt").await;
    assert_eq!((r.status, r.text().as_str()), (200, "a/b in pub"));

    let stats = shellac.stats().await;
    assert_eq!(stats["rewrite"], 3 + 6, "3 on the default site, 6 on files");
    assert_eq!(stats["rewrite_redirect"], 2);
    assert_eq!(a.count(), 4);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}
