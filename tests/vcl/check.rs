//! The VCL checker, one language feature per test: what it accepts, and for what it refuses
//! the file:line:column and words an operator sees. (Varnish's own test suite runs in
//! parse.rs; where field constructs are refused, in check_field.rs.)

use std::path::Path;

use shellac::vcl::types::Dialect;
use shellac::vcl::{ErrorKind, compile_file};

use crate::common::compile;

use compile::{errors, ok};

/// The errors as `line:col: message`.
pub(crate) fn messages(src: &str) -> Vec<String> {
    errors(src)
        .iter()
        .map(|e| format!("{}:{}: {}", e.pos.line, e.pos.col, e.message))
        .collect()
}

pub(crate) fn has(src: &str, want: &str) {
    let all = messages(src);
    assert!(
        all.iter().any(|m| m.contains(want)),
        "no error containing {want:?} in {all:?}"
    );
}

pub(crate) const B4: &str = "vcl 4.1;\nbackend b { .host = \"127.0.0.1\"; }\n";

pub(crate) fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vcl")
        .join(name)
}

#[test]
fn guide_configurations_compile() {
    let p = compile_file(&fixture("wordpress-4.vcl")).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.dialect, Dialect::V41);
    assert_eq!(p.origins.backends.len(), 2);
    assert_eq!(p.origins.probes.len(), 1, "the shared probe");
    assert_eq!(p.origins.directors.len(), 1);
    assert_eq!(p.origins.directors[0].backends, ["web1", "web2"]);
    // The 2.1 guide file asks for ESI in vcl_fetch (`esi;`): compiled as `beresp.do_esi`.
    let p = compile_file(&fixture("classic-2.1.vcl")).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.dialect, Dialect::V21);
    // Two 2.x directors; the inline member is a backend of its own.
    assert_eq!(p.origins.directors.len(), 2);
    assert_eq!(p.origins.backends.len(), 3);
}

#[test]
fn dialects_are_told_apart() {
    let p = ok("backend b { .host = \"h\"; }\nsub vcl_fetch { set obj.ttl = 1h; }\n");
    assert_eq!(p.dialect, Dialect::V20);
    let p = ok("backend b { .host = \"h\"; }\nsub vcl_fetch { set beresp.ttl = 1h; }\n");
    assert_eq!(p.dialect, Dialect::V21);
    // 2.x names are not 4.x names, and the reverse.
    has(
        &format!("{B4}sub vcl_recv {{ if (req.request == \"GET\") {{ return (pass); }} }}"),
        "Symbol not found: 'req.request' (Only available in VCL 2.0, 2.1/3.0",
    );
    has(
        "backend b { .host = \"h\"; }\nsub vcl_recv { if (req.method == \"GET\") { pass; } }",
        "Symbol not found: 'req.method' (a VCL 4.x name; this file has no `vcl 4.1;` line",
    );
    has(
        "vcl 5.0;\nbackend b { .host = \"h\"; }",
        "VCL version 5.0 not supported",
    );
}

#[test]
fn variables_are_checked_per_subroutine() {
    has(
        &format!("{B4}sub vcl_recv {{ set beresp.ttl = 1h; }}"),
        "3:16: 'beresp.ttl': Not available in subroutine 'vcl_recv'.",
    );
    has(
        &format!("{B4}sub vcl_deliver {{ set req.proto = \"HTTP/1.2\"; }}"),
        "Variable is read only.",
    );
    has(
        &format!("{B4}sub vcl_recv {{ unset req.http.content-length; }}"),
        "Variable cannot be unset",
    );
    has(
        &format!("{B4}sub vcl_recv {{ set req.http.content-length = \"1\"; }}"),
        "Variable is read only.",
    );
    // A custom sub is checked for every subroutine that calls it.
    has(
        &format!(
            "{B4}sub helper {{ set req.http.x = beresp.reason; }}\n\
             sub vcl_recv {{ call helper; }}\nsub vcl_backend_response {{ call helper; }}"
        ),
        "(sub helper is called from it)",
    );
    // Unreached and impossible: req.* and beresp.* in one sub.
    has(
        &format!("{B4}unused s;\nsub s {{ set req.http.x = beresp.reason; }}"),
        "Impossible Subroutine",
    );
    ok(&format!(
        "{B4}sub vcl_backend_response {{ set beresp.ttl = 2m; set beresp.grace = 1h; \
         set beresp.http.x = bereq.url; unset beresp.http.set-cookie; }}"
    ));
    // 2.x: obj.* in vcl_hit is the stored object; in vcl_error the generated response.
    ok(
        "backend b { .host = \"h\"; }\nsub vcl_hit { set obj.ttl = 0s; }\n\
        sub vcl_error { set obj.http.x = obj.response; }",
    );
}

#[test]
fn types_are_checked() {
    has(
        &format!("{B4}sub vcl_recv {{ if (req.restarts != req.url) {{ }} }}"),
        "Comparison of different types: INT '!=' STRING",
    );
    has(
        &format!("{B4}sub vcl_recv {{ set req.http.foo = \"bla\" * \"foo\"; }}"),
        "Operator * not possible on type STRING.",
    );
    has(
        &format!("{B4}sub vcl_backend_response {{ set beresp.ttl = beresp.ttl + beresp.status; }}"),
        "DURATION + INT not possible.",
    );
    has(
        &format!("{B4}sub vcl_backend_response {{ set beresp.ttl = 120; }}"),
        "Expression has type INT, expected DURATION",
    );
    has(
        &format!("{B4}sub vcl_backend_fetch {{ set bereq.backend += b; }}"),
        "Expected '=' got '+='",
    );
    has(
        &format!("{B4}sub vcl_recv {{ if (req.url ~ req.http.x) {{ }} }}"),
        "Expected CSTR",
    );
    has(
        &format!("{B4}sub vcl_recv {{ if (req.url ~ \"[a\") {{ }} }}"),
        "Regexp compilation error",
    );
    has(
        &format!("{B4}sub vcl_recv {{ set req.http.x = 1234567890123456; }}"),
        "Too many digits for integer",
    );
    // What is allowed: strings concatenate anything, numbers are true when not zero,
    // an IP compares with an address in quotes, time arithmetic.
    ok(&format!(
        "{B4}sub vcl_deliver {{ set resp.http.x = \"hits \" + obj.hits + \" ttl \" + obj.ttl; \
         if (obj.hits) {{ }} if (client.ip == \"127.0.0.1\") {{ }} \
         if (now - obj.age > now - 1h) {{ }} }}"
    ));
    // 2.x: a number is not a string, two values are not compared.
    has(
        "backend b { .host = \"h\"; }\nsub vcl_recv { set req.url = 1; }",
        "Expected a string",
    );
    has(
        "backend b { .host = \"h\"; }\nsub vcl_hash { if (2 == 3) { } }",
        "Expected a variable",
    );
}

#[test]
fn actions_are_checked_per_subroutine() {
    has(
        &format!("{B4}sub vcl_hash {{ return (pass); }}"),
        "Invalid return \"pass\" in vcl_hash",
    );
    has(
        &format!("{B4}sub vcl_recv {{ return; }}"),
        "Expected '(' got ';'",
    );
    has(
        &format!("{B4}sub vcl_recv {{ pass; }}"),
        "in VCL 4.x write 'return (pass);'",
    );
    has(
        "backend b { .host = \"h\"; }\nsub vcl_recv { discard; }",
        "Unknown action 'discard'",
    );
    ok(
        "backend b { .host = \"h\"; }\nsub vcl_recv { if (req.request == \"PURGE\") { lookup; } \
        error 405 \"Not allowed\"; }\nsub vcl_fetch { set beresp.cacheable = true; deliver; }",
    );
    // A bare `return;` leaves a custom sub.
    ok(&format!(
        "{B4}sub s {{ return; }}\nsub vcl_recv {{ call s; }}"
    ));
    // `pass(DURATION)`: vcl_backend_response's only (Varnish's VRT_hit_for_pass), one duration.
    ok(&format!(
        "{B4}sub vcl_backend_response {{ return (pass(2m)); }}"
    ));
    has(
        &format!("{B4}sub vcl_recv {{ return (pass(2m)); }}"),
        "return (pass(DURATION)) is only allowed in vcl_backend_response",
    );
    has(
        &format!("{B4}sub vcl_backend_response {{ return (pass(2m, 1s)); }}"),
        "pass() takes one duration, as in pass(120s)",
    );
}

/// Varnish 6's Unix-socket backends (`.path`, trunk c00088-c00092, v00055, v00057): the
/// backend connects to the socket file (`address = "unix:PATH"`) and sends `0.0.0.0` as Host
/// to a request without one; a relative path, an abstract name, `.host` beside it, VCL 4.0, a
/// file that is not a socket are refused (trunk v00038, b00053), in Varnish's words.
#[test]
fn unix_socket_backends_take_an_absolute_path() {
    let p = ok("vcl 4.1;\nbackend b { .path = \"/run/app.sock\"; }");
    let b = &p.origins.backends[0];
    assert_eq!(b.address.as_deref(), Some("unix:/run/app.sock"));
    assert_eq!(b.host_header.as_deref(), Some("0.0.0.0"));
    let p = ok("vcl 4.1;\nbackend b { .path = \"/run/app.sock\"; .host_header = \"app\"; }");
    assert_eq!(p.origins.backends[0].host_header.as_deref(), Some("app"));
    has(
        "vcl 4.1;\nbackend b { .path = \"run/app.sock\"; }",
        "Must be a valid path or abstract socket",
    );
    has(
        "vcl 4.1;\nbackend b { .path = \"@app\"; }",
        "abstract Unix sockets",
    );
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; .path = \"/run/app.sock\"; }",
        "Address redefinition at:",
    );
    has(
        "vcl 4.0;\nbackend b { .path = \"/run/app.sock\"; }",
        "Unix socket backends only supported in VCL4.1 and higher.",
    );
    has(
        "vcl 4.1;\nbackend b { .path = \"/tmp\"; }",
        "Not a socket: /tmp",
    );
}

#[test]
fn declarations_are_checked() {
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; .foobar = 1; }",
        "Unknown field: '.foobar'",
    );
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; .host = \"i\"; }",
        "Field '.host' redefined",
    );
    has(
        "vcl 4.1;\nbackend b { .port = \"80\"; }",
        "Mandatory field 'host' missing",
    );
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; .probe = { .window = 65; .threshold = 3; } }",
        "Window must be 64 or less",
    );
    // As Varnish 4.x and 2.x both refuse them (trunk/v00038.vtc, b00053.vtc, v00021.vtc).
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; .probe = { .window = 32; } }",
        "Must specify .threshold with .window",
    );
    has(
        "vcl 4.0;\nbackend default none;",
        "needs 'vcl 4.1;': Compiled VCL version (4.0) not supported.",
    );
    ok("vcl 4.1;\nbackend default none;\nsub vcl_recv { return (synth(200)); }");
    has(
        &format!(
            "vcl 4.1;\nbackend b {{ .host = \"h\"; }}\nsub vcl_deliver {{ set resp.http.{} = \"x\"; }}",
            "h".repeat(127)
        ),
        "HTTP header (hhhhhhhhhhhhhhhhhhhh..) is too long.",
    );
    ok(&format!(
        "vcl 4.1;\nbackend b {{ .host = \"h\"; }}\nsub vcl_deliver {{ set resp.http.{} = \"x\"; }}",
        "h".repeat(126)
    ));
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; .probe = { .url = \"/\"; .request = \"GET / HTTP/1.1\"; } }",
        "Probe request redefinition",
    );
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; }\nbackend c { .host = \"h\"; }",
        "Unused backend c",
    );
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; }\nbackend b { .host = \"h\"; }",
        "Backend 'b' redefined",
    );
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; }\nacl a { \"10.0.0.0\"/33; }\nsub vcl_recv { if (client.ip ~ a) { } }",
        "Too wide mask (/33) for IPv4 address",
    );
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; }\nsub s { call s; }\nsub vcl_recv { call s; }",
        "Recursive call",
    );
    has(
        "vcl 4.1;\nbackend b { .host = \"h\"; }\nsub vcl_recv { call nope; }",
        "Undefined sub nope",
    );
    has(
        "vcl 4.1;\nsub vcl_recv { }",
        "No backends or directors found",
    );
    // A backend named `default` is the default; `unused` allows a declaration to go unused.
    let p =
        ok("vcl 4.1;\nbackend a { .host = \"h\"; }\nunused a;\nbackend default { .host = \"i\"; }");
    assert_eq!(p.origins.default.as_deref(), Some("default"));
    // 2.x directors with inline backends become Shellac directors.
    let p = ok(
        "backend a { .host = \"h\"; }\ndirector d random {\n { .backend = a; .weight = 2; }\n \
                { .backend = { .host = \"i\"; .port = \"81\"; } .weight = 1; }\n}\n\
                sub vcl_recv { set req.backend = d; }",
    );
    assert_eq!(p.origins.directors[0].backends, ["a", "d_2"]);
    assert_eq!(p.origins.backends[1].port, 81);
    assert_eq!(p.origins.backends[0].weight, 200, "weights in hundredths");
}

#[test]
fn vcl_init_makes_directors() {
    let p = ok(&format!(
        "{B4}backend c {{ .host = \"h\"; }}\nimport directors;\nsub vcl_init {{\n \
         new rr = directors.round_robin();\n rr.add_backend(b);\n rr.add_backend(c);\n \
         new h = directors.hash();\n h.add_backend(b);\n}}\n\
         sub vcl_recv {{ set req.backend_hint = rr.backend(); \
         if (req.url ~ \"^/x\") {{ set req.backend_hint = h.backend(req.url); }} }}"
    ));
    let names: Vec<&str> = p
        .origins
        .directors
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["rr", "h"]);
    has(
        &format!("{B4}sub vcl_init {{ return (fail(\"no\")); }}"),
        "VCL failed initialization (vcl_init returned fail: no)",
    );
}

/// `resp.do_esi = false` (4.1) sends a page unassembled since a65fa37 (tests/esi/vcl.rs
/// vcl_req_top_can_esi_resp_do_esi_and_the_key_without_host): it compiles.
#[test]
fn resp_do_esi_compiles() {
    ok(&format!(
        "{B4}sub vcl_deliver {{ set resp.do_esi = false; }}"
    ));
}

#[test]
fn what_shellac_does_not_have_is_refused_not_ignored() {
    for (src, want) in [
        (
            "import geoip2;\nsub vcl_recv { }",
            "Shellac has no VMOD 'geoip2'",
        ),
        (
            "import redis;\nsub vcl_recv { }",
            "Shellac has no VMOD 'redis'",
        ),
        ("sub vcl_recv { C{ int x; }C }", "inline C"),
        (
            "sub vcl_recv { if (req.url ~ \"(?|(a)|(b))\") { } }",
            "PCRE features Shellac's regular expressions do not have",
        ),
    ] {
        let errs = errors(&format!("{B4}{src}"));
        assert!(
            errs.iter()
                .any(|e| e.kind == ErrorKind::Unsupported && e.message.contains(want)),
            "{want}: {errs:?}"
        );
        // With file:line:column.
        assert!(errs[0].to_string().starts_with("t.vcl:"), "{}", errs[0]);
    }
    // Uses of a refused VMOD report nothing more.
    let errs = errors(&format!(
        "{B4}import geoip2;\nsub vcl_recv {{ set req.http.c = geoip2.country(client.ip); }}"
    ));
    assert_eq!(errs.len(), 1, "{errs:?}");
    // Switches set to what Shellac does anyway are fine.
    ok(&format!(
        "{B4}sub vcl_backend_response {{ set beresp.do_esi = true; set beresp.do_stream = true; }}"
    ));
}

#[test]
fn every_error_is_reported_in_one_run() {
    let all = messages(
        "vcl 4.1;\nbackend b { .host = \"h\"; }\n\
         sub vcl_recv {\n set req.http.a = beresp.reason;\n set req.nope = 1;\n return (deliver);\n}\n\
         sub vcl_deliver { set resp.status = \"x\"; }\n",
    );
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(all[0].starts_with("4:19: 'beresp.reason'"), "{all:?}");
    assert!(
        all[1].starts_with("5:2: Symbol not found: 'req.nope'"),
        "{all:?}"
    );
    assert!(
        all[2].starts_with("6:2: Invalid return \"deliver\""),
        "{all:?}"
    );
    assert!(
        all[3].starts_with("8:37: Expression has type STRING, expected INT"),
        "{all:?}"
    );
}

#[test]
fn cookie_and_std_functions_are_typed() {
    ok(&format!(
        "{B4}import std;\nimport cookie;\nsub vcl_recv {{\n cookie.parse(req.http.cookie);\n \
         cookie.keep(\"session,lang\");\n cookie.filter_re(\"^_ga\");\n \
         set req.http.cookie = cookie.get_string();\n \
         if (cookie.isset(\"session\")) {{ return (pass); }}\n \
         set req.http.x = std.tolower(req.http.host) + std.integer(req.http.n, 0);\n \
         if (std.healthy(req.backend_hint) && std.port(client.ip) > 0) {{ }}\n \
         std.log(\"x\");\n std.collect(req.http.accept);\n}}"
    ));
    has(
        &format!("{B4}import std;\nsub vcl_recv {{ std.log(); }}"),
        "std.log(): Argument 's' missing",
    );
    has(
        &format!("{B4}sub vcl_recv {{ std.log(\"x\"); }}"),
        "add 'import std;' first",
    );
    has(
        &format!("{B4}sub vcl_recv {{ hash_data(req.url); }}"),
        "hash_data() is Not available in subroutine 'vcl_recv'.",
    );
}
