//! Unit tests of the VCL parser: each language feature's tree, and errors' words and places.

use super::ast::{Decl, Expr, FieldValue, Stmt, Vcl};
use super::parse;

fn ok(src: &str) -> Vcl {
    parse("t.vcl", src).unwrap_or_else(|e| panic!("{e}"))
}

fn err(src: &str) -> String {
    parse("t.vcl", src)
        .expect_err("must be refused")
        .to_string()
}

fn body(vcl: &Vcl) -> &[Stmt] {
    match vcl.decls.last() {
        Some(Decl::Sub { body, .. }) => body,
        other => panic!("not a sub: {other:?}"),
    }
}

#[test]
fn modern_file_with_backend_probe_acl_and_sub() {
    let v = ok(r#"vcl 4.1;
        import std;
        import directors as d from "/lib/vmod.so";
        include "other.vcl";
        probe healthy { .url = "/"; .interval = 5s; .window = 5; .threshold = 3; }
        backend web { .host = "10.0.0.1"; .port = "8080"; .probe = healthy; }
        backend spare { .host = "10.0.0.2"; .probe = { .request = "GET / HTTP/1.1" "Host: x"; } }
        backend off none;
        acl purgers { "localhost"; "10.0.0.0"/8; !"10.0.0.5"; ("maybe.example"); }
        sub vcl_init { new rr = directors.round_robin(); rr.add_backend(web); }
        sub vcl_recv {
            if (req.method == "PURGE" && client.ip ~ purgers) { return (purge); }
            elsif (req.url ~ "^/admin") { return (pass); }
            else if (!req.http.Cookie) { unset req.http.Cookie; }
            else { set req.http.X = std.tolower(regsub(req.url, "\?.*$", "")) + "-x"; }
            hash_data(req.url);
            return (synth(503, "Down"));
        }"#);
    assert_eq!(v.version.as_ref().map(|v| v.0.as_str()), Some("4.1"));
    assert_eq!(v.decls.len(), 10);
    let Some(Decl::Import { alias, from, .. }) = v.decls.get(1) else {
        panic!()
    };
    assert_eq!(
        (alias.as_deref(), from.as_deref()),
        (Some("d"), Some("/lib/vmod.so"))
    );
    let Some(Decl::Acl { entries, .. }) = v.decls.get(7) else {
        panic!()
    };
    assert_eq!(entries[1].mask, Some(8));
    assert!(entries[2].negated && entries[3].optional);
    let stmts = body(&v);
    assert!(
        matches!(&stmts[0], Stmt::If { branches, otherwise: Some(_), .. } if branches.len() == 3)
    );
    assert!(
        matches!(&stmts[2], Stmt::Return { action: Some(Expr::Call { func, args, .. }), .. }
        if func == "synth" && args.len() == 2)
    );
}

#[test]
fn old_dialect_directors_actions_and_juxtaposition() {
    let v = ok(r#"
        backend a { .host = "a"; }
        director d random { .retries = 3; { .backend = a; .weight = 1; }
            { .backend = { .host = "b"; .port = "81"; }; .weight = 2; } }
        director dns_d dns { .list = { .port = "80"; "192.168.15.0"/24; } .ttl = 5m; }
        sub vcl_fetch {
            if (obj.ttl < 120s) { set obj.ttl = 1.5m; }
            set req.hash += req.url;
            set req.http.X = "a" req.url "b";
            esi;
            error 503 "Service" " unavailable";
            remove req.http.Cookie;
            lookup;
        }"#);
    assert!(v.version.is_none());
    let Some(Decl::Director {
        kind,
        members,
        fields,
        ..
    }) = v.decls.get(1)
    else {
        panic!()
    };
    assert_eq!(
        (kind.as_str(), members.len(), fields.len()),
        ("random", 2, 1)
    );
    let Some(Decl::Director { fields, .. }) = v.decls.get(2) else {
        panic!()
    };
    assert!(matches!(&fields[0].value, FieldValue::List { entries, .. } if entries.len() == 1));
    let stmts = body(&v);
    assert!(matches!(&stmts[1], Stmt::Set { op: "+=", .. }));
    assert!(matches!(
        &stmts[2],
        Stmt::Set {
            value: Expr::Concat { parts, .. },
            ..
        } if parts.len() == 3
    ));
    assert!(matches!(&stmts[4], Stmt::Action { name, args, .. }
        if name == "error" && args.len() == 2 && matches!(args[0], Expr::Number(..))));
    assert!(matches!(&stmts[5], Stmt::Unset { .. }));
    assert!(
        matches!(&stmts[6], Stmt::Action { name, args, .. } if name == "lookup" && args.is_empty())
    );
}

#[test]
fn precedence_follows_varnish() {
    let v = ok("sub s { if (a || b && !c ~ \"x\") { call t; } }");
    let Some(Stmt::If { branches, .. }) = body(&v).first() else {
        panic!()
    };
    let Expr::Binary {
        op: "||", right, ..
    } = &branches[0].0
    else {
        panic!()
    };
    let Expr::Binary {
        op: "&&", right, ..
    } = right.as_ref()
    else {
        panic!()
    };
    let Expr::Unary { op: "!", expr, .. } = right.as_ref() else {
        panic!()
    };
    assert!(matches!(expr.as_ref(), Expr::Binary { op: "~", .. }));
}

#[test]
fn quoted_header_names_and_methods_on_values() {
    let v = ok(r#"sub s { set resp.http."x~y" = resp.http."a".upper(); std.log(s = "n"); }"#);
    assert!(
        matches!(&body(&v)[0], Stmt::Set { target, value: Expr::Method { .. }, .. }
        if target == "resp.http.\"x~y\"")
    );
    assert!(err("sub s { set req.http.{\"a\nb\"} = \"x\"; }").contains("may not hold '\\n'"));
    assert!(err("sub foo.bar { }").contains("may not hold '.'"));
    ok("acl my-acl { \"localhost\"; } sub my-sub { }");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    // 200 levels of an unoptimised (debug) build's parser frames need more than the 2 MiB a
    // test thread gets since VclError carries its source excerpt (eb28bf9). `check` and
    // `serve` parse on the main thread (8 MiB), a reload on a runtime worker, which has 8 MiB
    // too (cli/serve.rs, WORKER_STACK; tests/reload/deep_vcl.rs). Run with that stack, so the
    // test checks the limit.
    let run = || {
        let deep = format!(
            "sub s {{ set x = {}1{}; }}",
            "(".repeat(100_000),
            ")".repeat(100_000)
        );
        assert!(err(&deep).contains("nest deeper than 200 levels"));
        let deep = format!("sub s {}{}", "{".repeat(100_000), "}".repeat(100_000));
        assert!(err(&deep).contains("nest deeper than 200 levels"));
        let deep = format!("sub s {{ set x = {}1; }}", "!".repeat(100_000));
        assert!(err(&deep).contains("nest deeper than 200 levels"));
        ok(&format!(
            "sub s {{ set x = {}1{}; }}",
            "(".repeat(60),
            ")".repeat(60)
        ));
    };
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(run)
        .expect("spawn a test thread")
        .join()
        .expect("deep nesting is an error, not a crash");
}

/// Every prefix and every one-byte deletion of a real file parses or errs, never panics.
#[test]
fn damaged_files_never_panic() {
    let src = "vcl 4.1; import std; backend b { .host = \"h\"; .probe = { .url = \"/\"; } }\n\
               acl a { \"10.0.0.0\"/8; !(\"x\"); } sub vcl_recv { if (req.url ~ \"^/a\" && \
               !req.http.X) { set req.http.Y = regsub(req.url, \"x\", \"y\") + \"z\"; } \
               elsif (req.restarts > 0) { return (synth(503, {\"long\"})); } \
               else { unset req.http.Cookie; call other; } } director d random { { .backend = b; } }\
               sub other { error 503 \"x\"; set obj.ttl = 1.5m; hash_data(:AQID:); }";
    ok(src);
    for cut in 0..src.len() {
        if src.is_char_boundary(cut) {
            let _ = parse("t.vcl", &src[..cut]);
            let mut damaged = src.to_string();
            damaged.remove(cut);
            let _ = parse("t.vcl", &damaged);
        }
    }
}

#[test]
fn include_at_top_level_and_in_a_sub() {
    let v = ok("include +glob \"conf.d/*.vcl\"; sub vcl_recv { include \"recv.vcl\"; }");
    assert!(
        matches!(&v.decls[0], Decl::Include { path, glob: true, .. } if path == "conf.d/*.vcl")
    );
    assert!(matches!(&body(&v)[0], Stmt::Include { path, glob: false, .. } if path == "recv.vcl"));
    assert!(err("include recv.vcl;").contains("expected the file to include, in quotes"));
}

#[test]
fn inline_c_is_kept_to_be_refused() {
    let v = ok("C{ #include <stdio.h> }C sub s { C{ x(); }C }");
    assert!(matches!(v.decls[0], Decl::CCode { .. }));
    assert!(matches!(body(&v)[0], Stmt::CCode { .. }));
}

#[test]
fn errors_say_where_and_what_was_expected() {
    assert_eq!(
        err("sub vcl_recv {\n  set req.url \"x\";\n}"),
        "t.vcl:2:15: expected '=' after 'set req.url', found the string \"x\""
    );
    assert_eq!(
        err("backend b { host = \"x\"; }"),
        "t.vcl:1:13: expected a setting such as '.host = \"...\";' or '}', found 'host'"
    );
    assert_eq!(
        err("sub s {\n  pass;\n"),
        "t.vcl:3:1: expected '}' to close the block, found the end of the file"
    );
    assert!(
        err("vcl 4.1\nsub s {}")
            .starts_with("t.vcl:2:1: expected ';' after the 'vcl' version line")
    );
    assert!(err("sub s { req.url = \"/\"; }").contains("write 'set req.url = ...;'"));
    assert!(err("sub s { return pass; }").contains("expected '(' after 'return'"));
    assert!(err("acl a { \"1.2.3.4\"/x; }").contains("expected a mask length"));
    assert!(err("frobnicate x;").contains("expected a declaration"));
    assert!(err("sub s { set x = ; }").contains("expected a value"));
    assert!(err("sub s { set req.url = \"foo\" if \"bar\"; }").contains("'if' is a keyword"));
    assert!(err("sub s { purge_url(if); }").contains("'if' is a keyword"));
}
