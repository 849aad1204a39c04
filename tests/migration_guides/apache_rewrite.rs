//! docs/migrating-from-apache.md's mod_rewrite rows (issue 31), through the real proxy: each
//! row's Shellac form is read from the table itself, put in a configuration with the paths
//! the test needs, and must do what the Apache directive did — `[R=301,L]`, `[F]`, `[G]`,
//! `[P]`, an internal rewrite (`[L]`) and its `[QSA]` query, `RewriteCond` on the host, the
//! method and a cookie, `[NC]`.

use super::*;

const GUIDE: &str = include_str!("../../docs/migrating-from-apache.md");

/// The backticked pieces of the Shellac cell of the table row whose Apache cell starts with
/// `` `apache``.
fn shellac_cell(apache: &str) -> Vec<String> {
    let start = format!("| `{apache}");
    let row = GUIDE
        .lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no row {apache:?}"));
    let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
    assert_eq!(cells.len(), 2, "{row}");
    cells[1]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// An origin answering `NAME PATH-AND-QUERY`, with no freshness (nothing is cached: every
/// request shows where it went).
async fn named(name: &'static str) -> Origin {
    Origin::start(move |seen| Reply::ok(&format!("{name} {}", seen.path))).await
}

/// A configuration file in `dir` with the two origins as backends `apache` (the default)
/// and `app`, then `rest`; Shellac started on it.
async fn start(dir: &std::path::Path, apache: &Origin, app: &Origin, rest: &str) -> Shellac {
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n\
         [[backend]]\nname = \"apache\"\nhost = \"127.0.0.1\"\nport = {}\n\n\
         [[backend]]\nname = \"app\"\nhost = \"127.0.0.1\"\nport = {}\n\n{rest}",
        apache.addr.port(),
        app.addr.port()
    );
    let path = dir.join("shellac.toml");
    std::fs::write(&path, text).unwrap();
    Shellac::start_reloadable(&path).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apache_guides_rewrite_rows_work_through_the_proxy() {
    let redirect = shellac_cell("RewriteRule ^/old/(.*)$ /new/$1 [R=301,L]");
    assert_eq!(
        redirect,
        [
            "[[rule]] path = '^/old/(.*)$'",
            "redirect = { to = \"/new/$1\", status = 301 }",
            "[QSD]",
            "url = '^/old/([^?]*)(.*)$'",
            "to = \"/new/$1$2\"",
        ]
    );
    let refuse = shellac_cell("RewriteRule ... [F]");
    assert_eq!(
        refuse,
        ["synth = { status = 403 }", "synth = { status = 410 }"]
    );
    let proxy = shellac_cell("RewriteRule ... [P]");
    assert_eq!(proxy, ["director = \"NAME\""]);
    let nc = shellac_cell("[NC]");
    assert_eq!(nc, ["(?i)"]);
    let cond = shellac_cell("RewriteCond %{HTTP_HOST}");
    for matcher in ["host", "cookie", "method"] {
        assert!(cond.iter().any(|c| c == matcher), "{cond:?}");
    }
    let director = proxy[0].replace("NAME", "app");
    let (path, to) = (redirect[0].trim_start_matches("[[rule]] "), &redirect[1]);
    let (kept_url, kept_to) = (redirect[3].replace("/old/", "/kept/"), &redirect[4]);
    let (nc, forbidden, gone) = (&nc[0], &refuse[0], &refuse[1]);
    let rules = format!(
        "# RewriteRule ^/old/(.*)$ /new/$1 [R=301,L]\n[[rule]]\n{path}\n{to}\n\n\
         # RewriteRule ^/kept/(.*)$ /new/$1 [R=301,L] (the query kept)\n\
         [[rule]]\n{kept_url}\nredirect = {{ {kept_to}, status = 301 }}\n\n\
         # RewriteRule ^/forbidden - [F,NC]\n[[rule]]\npath = '{nc}^/forbidden'\n{forbidden}\n\n\
         # RewriteRule ^/gone - [G]\n[[rule]]\npath = '^/gone'\n{gone}\n\n\
         # RewriteRule ^/app/(.*)$ http://app/app/$1 [P]\n[[rule]]\npath = '^/app/'\n{director}\n\n\
         # RewriteCond %{{HTTP_HOST}} ^legacy\\.example$ + RewriteRule ^/(.*)$ http://www.example/$1 [R=301,L]\n\
         [[rule]]\nhost = [\"legacy.example\"]\npath = '^/(.*)$'\n\
         redirect = {{ to = \"http://www.example/$1\", status = 301 }}\n\n\
         # RewriteCond %{{REQUEST_METHOD}} POST + RewriteRule ^/readonly - [F]\n\
         [[rule]]\nmethod = [\"POST\"]\npath = '^/readonly'\n{forbidden}\n\n\
         # RewriteCond %{{HTTP_COOKIE}} beta= + RewriteRule ^/feature http://app/feature [P]\n\
         [[rule]]\ncookie = '^beta$'\npath = '^/feature'\n{director}\n"
    );
    let (apache, app) = (named("apache").await, named("app").await);
    let dir = temp_dir("apache-rewrite");
    let shellac = start(&dir, &apache, &app, &rules).await;

    // [R=301,L]: the client is sent on, Apache never asked.
    let r = get(shellac.addr, "/old/2009/hello").await;
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("/new/2009/hello"))
    );
    let r = get(shellac.addr, "/old/a?x=1").await;
    assert_eq!(r.header("location"), Some("/new/a"), "[QSD]");
    // Apache's own default: the query kept.
    let r = get(shellac.addr, "/kept/a?x=1").await;
    assert_eq!((r.status, r.header("location")), (301, Some("/new/a?x=1")));
    let r = get(shellac.addr, "/kept/a").await;
    assert_eq!(r.header("location"), Some("/new/a"));
    // [F] with [NC], [G].
    for path in ["/forbidden/x", "/FORBIDDEN/x"] {
        assert_eq!(get(shellac.addr, path).await.status, 403, "{path}");
    }
    assert_eq!(get(shellac.addr, "/gone").await.status, 410);
    // RewriteCond %{HTTP_HOST}: only that host is redirected.
    let r = get_with(shellac.addr, "/p?x=1", &[("host", "legacy.example")]).await;
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("http://www.example/p"))
    );
    // RewriteCond %{REQUEST_METHOD}: a POST refused, a GET served.
    let r = request(shellac.addr, "POST", "/readonly", &[], b"x").await;
    assert_eq!(r.status, 403);
    assert_eq!(
        get(shellac.addr, "/readonly").await.text(),
        "apache /readonly"
    );
    assert_eq!(apache.count(), 1, "nothing else reached Apache");
    // [P]: proxied to the other origin; with RewriteCond %{HTTP_COOKIE}, only with the cookie.
    assert_eq!(get(shellac.addr, "/app/x").await.text(), "app /app/x");
    let beta = get_with(shellac.addr, "/feature", &[("cookie", "beta=1")]).await;
    assert_eq!(beta.text(), "app /feature");
    assert_eq!(
        get(shellac.addr, "/feature").await.text(),
        "apache /feature"
    );
    assert_eq!((apache.count(), app.count()), (2, 2));
    // Every answer Shellac made itself: five redirects and four refusals.
    assert_eq!(shellac.stat("synth_resp").await, 9);
    shellac.stop().await;

    // An internal rewrite (no R): the row's line, and one whose replacement has a query
    // ([QSA]: the client's query is appended to it).
    let internal = shellac_cell("RewriteRule` without `R`");
    let line = internal[0]
        .strip_prefix("[routing] rewrite = [")
        .and_then(|l| l.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{internal:?}"));
    assert_eq!(line, "'^/old/(.*)$ /new/$1 last'");
    assert!(internal.iter().any(|c| c == "[QSA]"), "{internal:?}");
    let routing = format!("[routing]\nrewrite = [{line}, '^/list/(.*)$ /list.php?page=$1 last']\n");
    let (apache, app) = (named("apache").await, named("app").await);
    let shellac = start(&dir, &apache, &app, &routing).await;
    let r = get(shellac.addr, "/old/a?x=1").await;
    assert_eq!((r.status, r.text().as_str()), (200, "apache /new/a?x=1"));
    let r = get(shellac.addr, "/list/3?sort=asc").await;
    assert_eq!(r.text(), "apache /list.php?page=3&sort=asc");
    assert_eq!(shellac.stat("rewrite").await, 2);
    assert_eq!(shellac.stat("rewrite_redirect").await, 0);
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}
