//! Issue 32, "VCL as Varnish runs it": constructs of field VCL files that Varnish accepts, each
//! accepted here with the meaning Shellac gives it, and the errors' words where a file is wrong.

mod common;

use shellac::vcl::{ErrorKind, VclError, compile_text};

use common::vcl::start_vcl;
use common::{Origin, Reply, get};

fn ok(src: &str) -> shellac::vcl::ir::Program {
    compile_text("t.vcl", src).unwrap_or_else(|e| {
        panic!(
            "expected to compile:\n{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn errors(src: &str) -> Vec<VclError> {
    match compile_text("t.vcl", src) {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e,
    }
}

fn has(src: &str, want: &str) {
    let all: Vec<String> = errors(src).iter().map(|e| e.to_string()).collect();
    assert!(
        all.iter().any(|m| m.contains(want)),
        "no error containing {want:?} in {all:?}"
    );
}

const B4: &str = "vcl 4.1;\nbackend b { .host = \"127.0.0.1\"; }\n";

#[test]
fn acl_entry_with_the_mask_inside_the_quotes() {
    let p = ok(&format!(
        "{B4}acl purge {{ \"172.16.0.0/16\"; !\"172.16.5.0/24\"; (\"10.0.0.0/8\"); \"::1/128\"; }}\n\
         sub vcl_recv {{ if (client.ip ~ purge) {{ return (pass); }} }}"
    ));
    let acl = &p.acls[0];
    let ip = |s: &str| s.parse().unwrap();
    assert!(acl.contains(ip("172.16.200.1")));
    assert!(!acl.contains(ip("172.16.5.1")), "the negated /24");
    assert!(!acl.contains(ip("172.17.0.1")));
    assert!(acl.contains(ip("10.200.0.1")));
    assert!(acl.contains(ip("::1")));
    // Varnish's words for the two ways it is wrong.
    let bad = |entry: &str| {
        format!(
            "{B4}acl a {{ {entry}; }}\nsub vcl_recv {{ if (client.ip ~ a) {{ return (pass); }} }}"
        )
    };
    has(&bad("\"10.0.1.0/1bc\""), ".../mask is not numeric.");
    has(&bad("\"10.0.1.0/22\" / 22"), "/mask only allowed once");
    has(&bad("\"10.0.1.0/33\""), "Too wide mask (/33)");
}

/// PCRE's `[[3-9]`: a literal `[` in a class (the regex crate reads a nested class).
#[test]
fn pcre_literal_bracket_in_a_class() {
    ok(&format!(
        "{B4}sub vcl_recv {{ if (req.url ~ \"^/[[3-9]\") {{ return (pass); }} }}"
    ));
}

/// Look-ahead, look-behind and back-references (Varnish is PCRE2) run on the backtracking
/// engine; a pathological pattern fails its match past `[vcl] match_limit` — the request is
/// answered and the counter `vcl_match_limit` says so — and `!~` is then true, as in Varnish.
#[tokio::test]
async fn pcre_look_around_and_back_references_run_with_a_match_limit() {
    let origin = Origin::start(|_| Reply::ok("o").cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url ~ "^/[[3-9]") { return (synth(201, "bracket")); }
    if (req.url ~ "^/(?!admin)x/") { return (synth(202, "look-ahead")); }
    if (req.url ~ "(?<=\.)png$") { return (synth(203, "look-behind")); }
    if (req.url ~ "^/(\w+)/\1$") { return (synth(204, "back-reference")); }
    if (req.url ~ "^/((?=a)a+)+$") { return (synth(205, "never")); }
    if (req.url !~ "^/((?=a)a+)+$") {
        set req.http.x-rewritten = regsuball(req.url, "((?=a)a+)+$", "b");
        return (synth(206, req.http.x-rewritten));
    }
}
"#;
    let shellac = start_vcl("pcre", vcl, &[origin.addr]).await;
    assert_eq!(get(shellac.addr, "/[a").await.status, 201);
    assert_eq!(get(shellac.addr, "/7a").await.status, 201);
    assert_eq!(get(shellac.addr, "/x/1").await.status, 202);
    assert_eq!(get(shellac.addr, "/a.png").await.status, 203);
    assert_eq!(get(shellac.addr, "/ab/ab").await.status, 204);
    assert_eq!(shellac.stat("vcl_match_limit").await, 0);
    let path = format!("/{}!", "a".repeat(64));
    let r = get(shellac.addr, &path).await;
    assert_eq!(r.status, 206, "the failed match is no match: `!~` is true");
    // regsuball past the limit leaves its subject as it was (the reason vcl_synth shows).
    assert!(r.text().contains(&path), "{}", r.text());
    // Three matches ran past the limit: `~`, `!~` and regsuball.
    assert_eq!(shellac.stat("vcl_match_limit").await, 3);
    shellac.stop().await;
    origin.stop();
}

/// What neither engine runs is refused as unsupported, with the pattern.
#[test]
fn pcre_branch_reset_is_refused_as_unsupported() {
    let e = errors(&format!(
        "{B4}sub vcl_recv {{ if (req.url ~ \"^(?|(a)|(b))$\") {{ return (pass); }} }}"
    ));
    assert_eq!(e[0].kind, ErrorKind::Unsupported, "{e:?}");
    assert!(e[0].message.contains("Regexp \"^(?|(a)|(b))$\""), "{e:?}");
}
