//! The checker on constructs of field VCL: typed cookie and std functions, where
//! `std.cache_req_body()` and Varnish 3.0's `purge;` may go, director members' weights and
//! string constants where an IP is expected (run end to end in field.rs).

use super::check::{B4, has, messages};
use crate::common::compile::ok;

/// `std.cache_req_body()`: only in vcl_recv (as Varnish), with a constant size (Shellac reads
/// the body before vcl_recv up to the largest size named); the program knows that size.
#[test]
fn cache_req_body_takes_a_constant_size_in_vcl_recv() {
    let p = ok(&format!(
        "{B4}import std;\nsub vcl_recv {{ if (std.cache_req_body(2KB)) {{ }} std.cache_req_body(100B); }}\n"
    ));
    assert_eq!(p.req_body_keep, Some(2048));
    assert_eq!(ok(&format!("{B4}sub vcl_recv {{ }}\n")).req_body_keep, None);
    has(
        &format!(
            "{B4}import std;\nsub vcl_recv {{ std.cache_req_body(std.integer(req.http.n, 1) * 1KB); }}\n"
        ),
        "the size must be a constant",
    );
    let all = messages(&format!(
        "{B4}import std;\nsub vcl_deliver {{ std.cache_req_body(1KB); }}\n"
    ));
    assert!(all.iter().any(|m| m.starts_with("4:")), "{all:?}");
}

/// Varnish 3.0's `purge;` (no condition) is vcl_hit's and vcl_miss's, also through a sub
/// they call; elsewhere it is refused with where it may go. (Run: field.rs.)
#[test]
fn varnish3_purge_statement_is_for_hit_and_miss() {
    let b = "backend b { .host = \"127.0.0.1\"; }\n";
    ok(&format!(
        "{b}sub p {{ purge; }}\nsub vcl_hit {{ call p; error 200 \"Purged\"; }}\nsub vcl_miss {{ purge; }}\n"
    ));
    has(
        &format!("{b}sub vcl_recv {{ purge; }}\n"),
        "2:16: 'purge;' (Varnish 3.0) is only possible in vcl_hit and vcl_miss, not in 'vcl_recv'",
    );
    has(
        &format!("{b}sub vcl_recv {{ purge(req.url ~ \"a\", 1); }}\n"),
        "purge takes one condition, as in purge(req.url ~ \"^/news\")",
    );
}

/// `directors.hash()`'s `add_backend(b, w)` takes a weight (1.0 when left out), as
/// vmod_directors' does; 0 is refused as for `random()`; a round-robin takes none.
#[test]
fn hash_director_members_take_a_weight() {
    let two = "backend a { .host = \"127.0.0.1\"; }\nbackend c { .host = \"127.0.0.2\"; }\nimport directors;\n";
    let p = ok(&format!(
        "{B4}{two}sub vcl_init {{ new h = directors.hash(); h.add_backend(b); h.add_backend(a, 2.5); h.add_backend(c); }}\nsub vcl_recv {{ set req.backend_hint = h.backend(req.url); }}\n"
    ));
    let d = &p.origins.directors[0];
    assert_eq!(d.backends, ["b", "a", "c"]);
    assert_eq!(d.member_weights, [100, 250, 100]);
    let p = ok(&format!(
        "{B4}{two}sub vcl_init {{ new h = directors.hash(); h.add_backend(b); h.add_backend(a); h.add_backend(c); }}\nsub vcl_recv {{ set req.backend_hint = h.backend(req.url); }}\n"
    ));
    assert!(
        p.origins.directors[0].member_weights.is_empty(),
        "unweighted: as before"
    );
    // The first member's weight counts too (it was dropped).
    let p = ok(&format!(
        "{B4}{two}sub vcl_init {{ new h = directors.hash(); h.add_backend(b, 3); h.add_backend(a); h.add_backend(c); }}\nsub vcl_recv {{ set req.backend_hint = h.backend(req.url); }}\n"
    ));
    assert_eq!(p.origins.directors[0].member_weights, [300, 100, 100]);
    has(
        &format!(
            "{B4}import directors;\nsub vcl_init {{ new h = directors.hash(); h.add_backend(b, 0); }}\nsub vcl_recv {{ set req.backend_hint = h.backend(req.url); }}\n"
        ),
        "4:59: a hash director member of weight 0 is not supported by Shellac (leave it out)",
    );
    has(
        &format!(
            "{B4}import directors;\nsub vcl_init {{ new r = directors.round_robin(); r.add_backend(b, 2); }}\nsub vcl_recv {{ set req.backend_hint = r.backend(); }}\n"
        ),
        "r.add_backend() takes only a backend",
    );
}

/// A string constant where an IP is expected is resolved when the VCL is compiled (vcc's "IP
/// constant"): an address, or a name with one address; a path or a name that does not
/// resolve is refused where it is written.
#[test]
fn string_constants_are_ip_constants_where_an_ip_is_expected() {
    let recv = |arg: &str| {
        format!("{B4}import std;\nsub vcl_recv {{ set req.http.a = std.ip(req.http.b, {arg}); }}\n")
    };
    ok(&recv("\"0.0.0.0\""));
    ok(&recv("\"::1\""));
    ok(&recv("\"[2001:db8::1]\""));
    has(
        &recv("\"/run/x.sock\""),
        "4:52: Cannot convert to an IP address: \"/run/x.sock\"",
    );
    has(
        &recv("\"no-such-host.invalid\""),
        "IP constant \"no-such-host.invalid\": not an address, and no name resolves",
    );
    has(
        &recv("req.http.c"),
        "Expression has type HEADER, expected IP",
    );
}

/// `directors.shard()`'s `add_backend(backend, ident, rampup, weight)`: the weight scales the
/// member's share of the keys (at least 1, as vmod_directors limits it); `ident` and `rampup`
/// are refused where they are written, as is `reconfigure(replicas)` and
/// `backend(healthy=IGNORE)`; no director takes arguments it does not declare.
#[test]
fn shard_director_arguments_are_taken_or_refused() {
    let head = format!("{B4}backend a {{ .host = \"127.0.0.2\"; }}\nimport directors;\n");
    let recv = "sub vcl_recv { set req.backend_hint = s.backend(); }\n";
    let p = ok(&format!(
        "{head}sub vcl_init {{ new s = directors.shard(); s.add_backend(b); s.add_backend(a, weight=3); s.reconfigure(); }}\n{recv}"
    ));
    assert_eq!(p.origins.directors[0].member_weights, [100, 300]);
    // Positional: (backend, ident, rampup, weight); below 1 counts as 1.
    let p = ok(&format!(
        "{head}sub vcl_init {{ new s = directors.shard(); s.add_backend(b, weight=0.5); s.add_backend(a); }}\n{recv}"
    ));
    assert_eq!(p.origins.directors[0].member_weights, [100, 100]);
    has(
        &format!(
            "{head}sub vcl_init {{ new s = directors.shard(); s.add_backend(b, \"one\"); s.add_backend(a); }}\n{recv}"
        ),
        "5:60: s.add_backend(ident=...) is not supported by Shellac",
    );
    has(
        &format!(
            "{head}sub vcl_init {{ new s = directors.shard(); s.add_backend(b, rampup=30s); s.add_backend(a); }}\n{recv}"
        ),
        "5:67: s.add_backend(rampup=...) is not supported by Shellac",
    );
    has(
        &format!(
            "{head}sub vcl_init {{ new s = directors.shard(); s.add_backend(b); s.add_backend(a); s.reconfigure(25); }}\n{recv}"
        ),
        "5:93: s.reconfigure(replicas): Shellac's shard director has no ring",
    );
    has(
        &format!(
            "{head}sub vcl_init {{ new s = directors.shard(); s.add_backend(b); s.add_backend(a); }}\nsub vcl_recv {{ set req.backend_hint = s.backend(healthy=IGNORE); }}\n"
        ),
        "6:57: shard.backend(healthy=IGNORE)",
    );
    has(
        &format!(
            "{head}sub vcl_init {{ new s = directors.shard(); s.add_backend(b, wieght=2); s.add_backend(a); }}\n{recv}"
        ),
        "5:67: s.add_backend() has no argument 'wieght'",
    );
    has(
        &format!(
            "{head}sub vcl_init {{ new r = directors.round_robin(); r.add_backend(b, a); }}\nsub vcl_recv {{ set req.backend_hint = r.backend(); }}\n"
        ),
        "5:66: r.add_backend() takes only a backend",
    );
    has(
        &format!(
            "{head}sub vcl_init {{ new h = directors.hash(); h.add_backend(b, 1, 2); }}\nsub vcl_recv {{ set req.backend_hint = h.backend(req.url); }}\n"
        ),
        "h.add_backend() takes a backend and weight",
    );
}
