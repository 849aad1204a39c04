//! Directors under VCL, end to end: vmod_directors over probed backends, `directors.lookup()`,
//! Varnish 2.1's hash and client directors, and `directors.shard()`.

use crate::common;
use crate::{healthy, wait_health};
use common::vcl::start_vcl;
use common::{Origin, Reply, get, get_with};

/// vmod_directors in vcl_init over backends with a shared probe: a sick backend is skipped,
/// a round-robin spreads over the healthy ones, `std.healthy()` and a hash director.
#[tokio::test]
async fn probes_and_vmod_directors() {
    let a = Origin::start(|seen| Reply::ok(&format!("a {}", seen.path))).await;
    let b = Origin::start(|seen| Reply::ok(&format!("b {}", seen.path))).await;
    let sick = Origin::start(|seen| {
        if seen.path == "/health" {
            Reply::ok("down").status(500)
        } else {
            Reply::ok("should not be asked")
        }
    })
    .await;
    let vcl = r#"vcl 4.1;
import directors;
import std;
probe health {
    .url = "/health";
    .interval = 50ms;
    .timeout = 1s;
    .window = 2;
    .threshold = 1;
    .initial = 0;
}
backend a { ${origin0} .probe = health; }
backend b { ${origin1} .probe = health; }
backend s { ${origin2} .probe = health; }
sub vcl_init {
    new rr = directors.round_robin();
    rr.add_backend(a);
    rr.add_backend(s);
    rr.add_backend(b);
    new h = directors.hash();
    h.add_backend(a);
    h.add_backend(b);
}
sub vcl_recv {
    if (req.url ~ "^/sticky") {
        set req.backend_hint = h.backend(req.http.x-user);
    } else {
        set req.backend_hint = rr.backend();
    }
    if (!std.healthy(req.backend_hint)) { return (synth(503, "nobody home")); }
    return (pass);
}
sub vcl_deliver { set resp.http.x-healthy-s = std.healthy(s); }
"#;
    let shellac = start_vcl("directors", vcl, &[a.addr, b.addr, sick.addr]).await;
    wait_health(&shellac, "a", true).await;
    wait_health(&shellac, "b", true).await;
    assert!(!healthy(&shellac, "s").await);
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..6 {
        let r = get(shellac.addr, &format!("/p{i}")).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-healthy-s"), Some("false"));
        seen.insert(r.text().split(' ').next().unwrap().to_string());
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["a", "b"],
        "both healthy ones, never s"
    );
    assert_eq!(sick.count_path("/p0") + sick.count_path("/p1"), 0);
    // The hash director sends one user to one backend.
    let first = get_with(shellac.addr, "/sticky", &[("x-user", "alice")])
        .await
        .text();
    for _ in 0..5 {
        let again = get_with(shellac.addr, "/sticky", &[("x-user", "alice")])
            .await
            .text();
        assert_eq!(again, first);
    }
    shellac.stop().await;
}

/// `directors.lookup("name")` in vcl_init is the backend of that name (resolved when the VCL
/// is loaded; an unknown name is an error there).
#[tokio::test]
async fn directors_lookup_names_a_backend_in_vcl_init() {
    let origin = Origin::start(|_| Reply::ok("from s1")).await;
    let vcl = r#"vcl 4.1;
import directors;
backend s1 { ${origin0} }
sub vcl_init {
    new bar = directors.random();
    bar.add_backend(directors.lookup("s1"), 1);
}
sub vcl_recv { set req.backend_hint = bar.backend(); return (pass); }
sub vcl_backend_response { set beresp.http.x-director = bereq.backend; }
"#;
    let shellac = start_vcl("lookup", vcl, &[origin.addr]).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.text(), "from s1");
    assert_eq!(r.header("x-director"), Some("bar"));
    shellac.stop().await;
    let bad = vcl
        .replace("lookup(\"s1\")", "lookup(\"s2\")")
        .replace("${origin0}", ".host = \"127.0.0.1\";");
    let errors = shellac::vcl::compile_text("t.vcl", &bad).unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("no backend has this name")),
        "{errors:?}"
    );
}

/// Regression (issue 21, varnishtest 2.1.5 v00026 / v00028): a 2.x program's `hash` and
/// `client` directors send a request to the member Varnish 2.1 would (the SHA-256 of the
/// hash inputs or of `client.identity`, on the cumulative weights).
#[tokio::test]
async fn legacy_hash_and_client_directors_pick_as_varnish_21() {
    let s1 = Origin::start(|_| Reply::ok("s1")).await;
    let s2 = Origin::start(|_| Reply::ok("s2")).await;
    let vcl = r#"
backend s1 { ${origin0} }
backend s2 { ${origin1} }
director h hash {
    { .backend = s1; .weight = 1; }
    { .backend = s2; .weight = 1; }
}
director c client {
    { .backend = s1; .weight = 1; }
    { .backend = s2; .weight = 1; }
}
sub vcl_recv {
    if (req.http.id) {
        set req.backend = c;
        set client.identity = req.http.id;
    } else {
        set req.backend = h;
    }
    return (pass);
}
"#;
    let shellac = start_vcl("legacy-hash", vcl, &[s1.addr, s2.addr]).await;
    let host = [("host", "127.0.0.1")];
    for (path, want) in [("/12", "s1"), ("/1", "s2"), ("/13", "s1"), ("/15", "s2")] {
        assert_eq!(
            get_with(shellac.addr, path, &host).await.text(),
            want,
            "{path}"
        );
    }
    for (id, want) in [("foo", "s1"), ("baz", "s2")] {
        let r = get_with(shellac.addr, "/", &[("host", "127.0.0.1"), ("id", id)]).await;
        assert_eq!(r.text(), want, "{id}");
    }
    shellac.stop().await;
}

/// `directors.shard()`: `add_backend(b, weight=9)` gives that member about nine times the
/// keys of a weight-1 one (the weight was accepted and ignored), and `backend(by=URL)` hashes
/// the URL alone: one URL goes to one backend whatever the host.
#[tokio::test]
async fn shard_director_weights_and_by_url() {
    let a = Origin::start(|_| Reply::ok("a")).await;
    let b = Origin::start(|_| Reply::ok("b")).await;
    let vcl = r#"vcl 4.1;
import directors;
backend a { ${origin0} }
backend b { ${origin1} }
sub vcl_init {
    new s = directors.shard();
    s.add_backend(a);
    s.add_backend(b, weight=9);
    s.reconfigure();
    new u = directors.shard();
    u.add_backend(a);
    u.add_backend(b);
}
sub vcl_recv {
    if (req.url ~ "^/u/") {
        set req.backend_hint = u.backend(by=URL);
    } else {
        set req.backend_hint = s.backend();
    }
    return (pass);
}
"#;
    let shellac = start_vcl("shard-weights", vcl, &[a.addr, b.addr]).await;
    let mut to_b = 0;
    for i in 0..60 {
        let r = get(shellac.addr, &format!("/k{i}")).await;
        assert_eq!(r.status, 200);
        if r.text() == "b" {
            to_b += 1;
        }
    }
    // About 54 of 60 expected (9:1); the placement is fixed by the hash, not random.
    assert!(
        (45..60).contains(&to_b),
        "{to_b} of 60 to the weight-9 member"
    );

    let mut seen = std::collections::BTreeSet::new();
    for i in 0..12 {
        let path = format!("/u/{i}");
        let first = get_with(shellac.addr, &path, &[("host", "one.test")])
            .await
            .text();
        for host in ["two.test", "three.test"] {
            let again = get_with(shellac.addr, &path, &[("host", host)])
                .await
                .text();
            assert_eq!(again, first, "{path} on {host}");
        }
        seen.insert(first);
    }
    assert_eq!(seen.len(), 2, "both members get URLs: {seen:?}");
    shellac.stop().await;
}
