//! Which site answers: server names with nginx's precedence, 421 for an unknown name on an
//! address without a default, a site on a Unix socket, a VCL restart that changes the host,
//! and the hotlink rule's server names.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_names_pick_sites_with_nginx_precedence() {
    let origins = [
        named("exact").await,
        named("leading").await,
        named("trailing").await,
        named("regex").await,
        named("fallback").await,
        named("longer").await,
    ];
    let names = [
        "exact", "leading", "trailing", "regex", "fallback", "longer",
    ];
    let mut text = SERVER.to_string();
    for (n, o) in names.iter().zip(&origins) {
        text.push_str(&backend(n, o));
    }
    text.push_str(
        r#"
[[site]]
name = "regex"
server_name = '~^www\d+\.example\.org$'
backend = "regex"
[[site]]
name = "trailing"
server_name = "mail.*"
backend = "trailing"
[[site]]
name = "leading"
server_name = "*.example.org"
backend = "leading"
[[site]]
name = "longer"
server_name = "*.www.example.org"
backend = "longer"
[[site]]
name = "exact"
server_name = [".example.com", "www.example.org"]
backend = "exact"
[[site]]
name = "fallback"
default = true
backend = "fallback"
"#,
    );
    let dir = temp_dir("sites-precedence");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let cases = [
        ("www.example.org", "exact"),
        ("WWW.Example.ORG:6081", "exact"),
        ("example.com", "exact"),
        ("a.example.com", "exact"),
        ("a.www.example.org", "longer"),
        ("www2.example.org", "leading"),
        ("mail.example.org", "leading"),
        ("mail.example.net", "trailing"),
        ("www7.example.org.", "leading"),
        ("nothing.test", "fallback"),
        ("example.org", "fallback"),
    ];
    for (host, site) in cases {
        let r = get_host(shellac.addr, host, "/p").await;
        assert_eq!(r.status, 200, "{host}");
        assert_eq!(r.text(), format!("{site} /p"), "{host}");
    }
    // The regex site is reached when no wildcard claims the name.
    let mut text2 = text.replace(
        "server_name = \"*.example.org\"",
        "server_name = \"*.example.net\"",
    );
    text2 = text2.replace(
        "server_name = \"*.www.example.org\"",
        "server_name = \"*.www.example.net\"",
    );
    // Written with capitals, as nginx configurations have them: matched without case there
    // (nginx compiles it caseless) as here.
    text2 = text2.replace(r"'~^www\d+\.example\.org$'", r"'~^WWW\d+\.Example\.ORG$'");
    assert!(text2.contains("WWW"), "{text2}");
    write(&file, &text2);
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    let r = get_host(shellac.addr, "www3.example.org", "/p").await;
    assert_eq!(r.text(), "regex /p");
    // One cache, keys with the host: the same path on two sites is two objects, and a
    // second request is a hit (fast or not) on the right one.
    let mut conn = Conn::open(shellac.addr).await;
    let a = conn
        .send("GET", "/same", &[("host", "www.example.org")], b"")
        .await;
    let b = conn
        .send("GET", "/same", &[("host", "www3.example.org")], b"")
        .await;
    let a2 = conn
        .send("GET", "/same", &[("host", "www.example.org")], b"")
        .await;
    let b2 = conn
        .send("GET", "/same", &[("host", "www3.example.org")], b"")
        .await;
    assert_eq!(a.text(), "exact /same");
    assert_eq!(b.text(), "regex /same");
    assert_eq!(a2.text(), "exact /same");
    assert!(a2.cache_status().contains("hit"), "{}", a2.cache_status());
    assert_eq!(b2.text(), "regex /same");
    assert!(b2.cache_status().contains("hit"), "{}", b2.cache_status());
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        2,
        "hits on sites take the fast path"
    );
    let metrics = get(shellac.admin, "/metrics").await.text();
    assert!(
        metrics.contains("shellac_site_hit_total{site=\"regex\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shellac_site_req_total{site=\"regex\"} 3"),
        "{metrics}"
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_name_on_an_address_without_a_default_gets_421() {
    let a = named("a").await;
    let b = named("b").await;
    let text = format!(
        "{SERVER}{}{}\n[[site]]\nname = \"first\"\nlisten = \"127.0.0.1:0\"\nserver_name = \"a.test\"\nbackend = \"a\"\n[[site]]\nname = \"other\"\nlisten = \"127.0.0.1:0\"\ndefault = true\nbackend = \"b\"\n[[site]]\nname = \"second\"\nlisten = \"127.0.0.2:0\"\nserver_name = \"a.test\"\nbackend = \"b\"\n",
        backend("a", &a),
        backend("b", &b)
    );
    let dir = temp_dir("sites-421");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let [first, second] = shellac.listening()[..] else {
        panic!("two listeners")
    };
    assert_eq!(get_host(first, "a.test", "/").await.text(), "a /");
    assert_eq!(get_host(first, "z.test", "/").await.text(), "b /");
    assert_eq!(get_host(second, "a.test", "/x").await.text(), "b /x");
    let r = get_host(second, "z.test", "/").await;
    assert_eq!(r.status, 421);
    assert!(
        r.cache_status().contains("unknown-site"),
        "{}",
        r.cache_status()
    );
    // Twice: the second time the fast-hit path sees it first, and leaves it to the full path.
    assert_eq!(get_host(second, "z.test", "/").await.status, 421);
    assert_eq!(shellac.stat("client_req_unknown_site").await, 2);
    // The status is the operator's.
    write(
        &file,
        &text.replace("[server]\n", "[server]\nunknown_site_status = 404\n"),
    );
    let (status, v) = shellac.reload().await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(get_host(second, "z.test", "/").await.status, 404);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// One request with `Connection: close` over the Unix socket at `path`: the whole answer.
async fn unix_get_host(path: &Path, host: &str, target: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    let req = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        s.read_to_string(&mut out),
    )
    .await;
    out
}

/// `listen = "unix:/path"` binds a site to one `server.listen_unix` socket (nginx's `listen
/// unix:/path`); a site without `listen` answers on every socket too, and a socket with sites
/// but no default answers an unknown name 421, as an address does. Hits on a socket take the
/// fast path under the socket's site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_listens_on_a_unix_socket() {
    let a = named("a").await;
    let b = named("b").await;
    let dir = temp_dir("sites-unix");
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    let text = format!(
        "{}listen_unix = [\"{}\", \"{}\"]\n{}{}\n[[site]]\nname = \"on-a\"\nlisten = \"unix:{}\"\ndefault = true\nbackend = \"a\"\n[[site]]\nname = \"everywhere\"\nserver_name = \"b.test\"\nbackend = \"b\"\n",
        SERVER,
        sock_a.display(),
        sock_b.display(),
        backend("a", &a),
        backend("b", &b),
        sock_a.display(),
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let body = |text: &str| text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    let r = unix_get_host(&sock_a, "x.test", "/p").await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(body(&r), "a /p");
    let r = unix_get_host(&sock_a, "x.test", "/p").await;
    assert_eq!(body(&r), "a /p");
    assert!(r.to_ascii_lowercase().contains("hit"), "{r}");
    assert_eq!(body(&unix_get_host(&sock_a, "b.test", "/p").await), "b /p");
    assert_eq!(body(&unix_get_host(&sock_b, "b.test", "/p").await), "b /p");
    let r = unix_get_host(&sock_b, "x.test", "/p").await;
    assert!(r.starts_with("HTTP/1.1 421"), "no default on b.sock: {r}");
    let first = shellac.listening()[0];
    assert_eq!(get_host(first, "x.test", "/q").await.status, 421);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// A VCL restart chooses the site again from the host it left: a host changed before the
/// restart takes the request to that site (and its rewrites); a restart on the same site
/// keeps the target its rewrites made, as nginx runs a server's rewrites once (they ran
/// twice before: `/a/a/x`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vcl_restart_that_changes_the_host_chooses_the_site_again() {
    let o = named("o").await;
    let dir = temp_dir("sites-restart");
    let vcl = format!(
        r#"vcl 4.1;
backend o {{ .host = "127.0.0.1"; .port = "{}"; }}
sub vcl_recv {{ return (pass); }}
sub vcl_deliver {{
    if (req.restarts == 0 && req.http.x-move) {{
        set req.http.host = req.http.x-move;
        return (restart);
    }}
    if (req.restarts == 0 && req.http.x-again) {{
        return (restart);
    }}
    set resp.http.x-restarts = req.restarts;
}}
"#,
        o.addr.port()
    );
    write(&dir.join("site.vcl"), &vcl);
    let text = format!(
        "{SERVER}[vcl]\nfile = \"site.vcl\"\n[[site]]\nname = \"a\"\nserver_name = \"a.test\"\nrewrite = '^/(.*)$ /a/$1 break'\n[[site]]\nname = \"b\"\nserver_name = \"b.test\"\nrewrite = '^/(.*)$ /b/$1 break'\n"
    );
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let r = get_host(shellac.addr, "a.test", "/x").await;
    assert_eq!(r.text(), "o /a/x");
    let r = get_with(shellac.addr, "/x", &[("host", "a.test"), ("x-again", "1")]).await;
    assert_eq!(r.header("x-restarts"), Some("1"));
    assert_eq!(r.text(), "o /a/x", "the same site's rewrites run once");
    let r = get_with(
        shellac.addr,
        "/x",
        &[("host", "a.test"), ("x-move", "b.test")],
    )
    .await;
    assert_eq!(r.header("x-restarts"), Some("1"));
    assert_eq!(
        r.text(),
        "o /b/a/x",
        "site b after the restart, its rewrite too"
    );
    let r = get_with(
        shellac.addr,
        "/x",
        &[("host", "a.test"), ("x-move", "z.test")],
    )
    .await;
    assert_eq!(r.status, 421, "no site for the new host, no default");
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Hotlink protection under a site: `valid_referers = ["server_names"]` takes a `Referer`
/// naming any of the site's `server_name`s (exact, wildcard), as nginx's `server_names` is
/// the server's names — not only the request's own host; another site's name is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hotlink_server_names_are_the_sites_own_names() {
    let a = named("a").await;
    let text = format!(
        r#"{SERVER}{}
[[site]]
name = "pics"
server_name = ["www.pics.test", "pics.test", "*.cdn.pics.test"]
[[site.rule]]
path = '^/img/'
valid_referers = ["server_names"]

[[site]]
name = "other"
server_name = "other.test"
"#,
        backend("a", &a)
    );
    let dir = temp_dir("sites-hotlink");
    let file = dir.join("shellac.toml");
    write(&file, &text);
    let shellac = Shellac::start_reloadable(&file).await;
    let addr = shellac.addr;
    let with_referer = |referer: &'static str| async move {
        get_with(
            addr,
            "/img/cat.jpg",
            &[("host", "www.pics.test"), ("referer", referer)],
        )
        .await
    };
    for ok in [
        "https://www.pics.test/gallery",
        "https://pics.test/",
        "http://eu.cdn.pics.test:8080/page",
    ] {
        let r = with_referer(ok).await;
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "a /img/cat.jpg"),
            "{ok}"
        );
    }
    for refused in ["https://other.test/", "https://cdn.pics.test.evil.test/"] {
        assert_eq!(with_referer(refused).await.status, 403, "{refused}");
    }
    assert_eq!(shellac.stat("hotlink_refused").await, 2);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}
