//! The interpreter on its own: a compiled program run against a small map-backed request.

use std::collections::HashMap;
use std::net::SocketAddr;

use http::HeaderValue;

use super::*;
use crate::vcl::compile_text;
use crate::vcl::ir::Var;
use crate::vcl::vars::Slot;

/// A request as a map of header fields plus URL and method.
#[derive(Default)]
struct MapEnv {
    url: String,
    method: String,
    headers: HashMap<String, String>,
    resp: HashMap<String, String>,
    state: State,
    bans: std::cell::RefCell<Vec<String>>,
    purges: std::cell::RefCell<Vec<Option<SoftPurge>>>,
    logged: Vec<String>,
    logged_limit: std::cell::Cell<usize>,
}

impl Env for MapEnv {
    fn match_limit_hit(&self) {
        self.logged_limit.set(self.logged_limit.get() + 1);
    }

    fn get(&self, var: &Var) -> Value<'_> {
        let field = || {
            var.header
                .as_ref()
                .map(|h| h.as_str().to_string())
                .unwrap_or_default()
        };
        match var.slot {
            Slot::ReqUrl => Value::str(&self.url),
            Slot::ReqMethod => Value::str(&self.method),
            Slot::ReqHttp => self
                .headers
                .get(&field())
                .map_or(Value::None, |v| Value::str(v)),
            Slot::RespHttp => self
                .resp
                .get(&field())
                .map_or(Value::None, |v| Value::str(v)),
            Slot::ReqRestarts => Value::Int(i64::from(self.state.restarts)),
            Slot::ClientIp => Value::Ip(SocketAddr::from(([10, 1, 2, 3], 5555))),
            _ => Value::None,
        }
    }
    fn set(&mut self, var: &Var, value: Value<'static>) -> Result<(), String> {
        let text = value.text(&|_| "b").into_owned();
        let field = var
            .header
            .as_ref()
            .map(|h| h.as_str().to_string())
            .unwrap_or_default();
        match var.slot {
            Slot::ReqUrl => self.url = text,
            Slot::ReqHttp => {
                self.headers.insert(field, text);
            }
            Slot::RespHttp => {
                self.resp.insert(field, text);
            }
            _ => {}
        }
        Ok(())
    }
    fn set_header(&mut self, var: &Var, value: HeaderValue) -> Result<(), String> {
        let text = value.to_str().unwrap_or("").to_string();
        self.set(var, Value::Str(std::borrow::Cow::Owned(text)))
    }
    fn unset(&mut self, var: &Var) -> Result<(), String> {
        let field = var
            .header
            .as_ref()
            .map(|h| h.as_str().to_string())
            .unwrap_or_default();
        self.headers.remove(&field);
        self.resp.remove(&field);
        Ok(())
    }
    fn collect(&mut self, _: &Var, _: &str) {}
    fn target_name(&self, _: u16) -> &str {
        "b"
    }
    fn healthy(&self, _: BackendSel) -> bool {
        true
    }
    fn ban(&self, expr: &str) -> Result<(), String> {
        // The cache's parser has its own tests (`cache/ban_expr.rs`); here one refusal.
        if expr.contains("//") {
            return Err(format!("refused {expr:?}"));
        }
        self.bans.borrow_mut().push(expr.to_string());
        Ok(())
    }
    fn purge(&self, soft: Option<super::SoftPurge>) -> usize {
        self.purges.borrow_mut().push(soft);
        1
    }
    fn purge_keys(&self, _: &str, _: bool) -> usize {
        0
    }
    fn throttle(
        &self,
        _: crate::vcl::ir::ThrottleOp,
        _: &str,
        _: i64,
        _: f64,
        _: f64,
    ) -> Value<'static> {
        Value::Bool(false)
    }
    fn log(&mut self, msg: &str) {
        self.logged.push(msg.to_string());
    }
    fn rollback(&mut self) {}
    fn state(&self) -> &State {
        &self.state
    }
    fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

fn program(subs: &str) -> crate::vcl::ir::Program {
    let src = format!(
        "vcl 4.1;\nimport std;\nimport cookie;\nimport purge;\nbackend b {{ .host = \"h\"; }}\n{subs}"
    );
    compile_text("t.vcl", &src).unwrap_or_else(|e| panic!("{e:?}"))
}

fn env(url: &str, headers: &[(&str, &str)]) -> MapEnv {
    MapEnv {
        url: url.to_string(),
        method: "GET".to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..MapEnv::default()
    }
}

#[test]
fn regsub_uses_varnish_backreferences_and_unset_strings_compare_as_varnish() {
    let p = program(
        r#"sub vcl_recv {
            set req.url = regsub(req.url, "^/old/(.*)$", "/new/\1");
            set req.http.x = regsuball(req.http.cookie, "(^|; )_ga=[^;]*", "");
            if (req.http.missing == "") { set req.http.eq = "yes"; }
            if (req.http.missing != "x") { set req.http.ne = "yes"; }
            return (hash);
        }"#,
    );
    let mut e = env("/old/a/b", &[("cookie", "_ga=1; a=2")]);
    assert_eq!(run(&p, Method::Recv, &mut e), Verdict::Hash);
    assert_eq!(e.url, "/new/a/b");
    assert_eq!(e.headers["x"], "; a=2");
    // As VRT_strcmp: an unset string equals nothing, not even "".
    assert!(!e.headers.contains_key("eq"));
    assert_eq!(e.headers["ne"], "yes");
    assert_eq!(e.state.trace_text(), "recv:hash");
}

#[test]
fn custom_subs_return_and_leave() {
    let p = program(
        r#"sub pick { if (req.url ~ "^/a") { return (pass); } set req.http.seen = "1"; return; }
        sub vcl_recv { call pick; set req.http.after = "1"; return (hash); }"#,
    );
    let mut e = env("/a", &[]);
    assert_eq!(run(&p, Method::Recv, &mut e), Verdict::Pass);
    assert!(!e.headers.contains_key("after"));
    let mut e = env("/b", &[]);
    assert_eq!(run(&p, Method::Recv, &mut e), Verdict::Hash);
    assert_eq!(e.headers["seen"], "1");
    assert_eq!(
        e.headers["after"], "1",
        "a bare return goes back to the caller"
    );
}

#[test]
fn the_built_in_vcl_runs_after_the_operators_code() {
    let p = program("sub vcl_recv { set req.http.x = \"1\"; }");
    assert_eq!(
        run(&p, Method::Recv, &mut env("/", &[("host", "h")])),
        Verdict::Hash
    );
    assert_eq!(
        run(
            &p,
            Method::Recv,
            &mut env("/", &[("host", "h"), ("cookie", "a=1")])
        ),
        Verdict::Pass
    );
    let mut post = env("/", &[("host", "h")]);
    post.method = "PROPFIND".to_string();
    assert_eq!(run(&p, Method::Recv, &mut post), Verdict::Pipe);
}

#[test]
fn synth_status_and_reason_and_failures() {
    let p = program(
        r#"sub vcl_recv {
            if (req.url == "/x") { return (synth(1418, "teapot " + req.url)); }
            set req.http.n = std.integer(req.http.bad, 7) + 1;
            set req.http.zero = 1 / std.integer(req.http.zero, 0);
        }"#,
    );
    assert_eq!(
        run(&p, Method::Recv, &mut env("/x", &[])),
        // The wide status stays (vcl_synth sees 1418; 418 goes on the wire), as in Varnish.
        Verdict::Synth(1418, Some("teapot /x".to_string()))
    );
    let mut e = env("/y", &[]);
    match run(&p, Method::Recv, &mut e) {
        Verdict::Fail(why) => assert!(why.contains("division by zero"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(e.headers["n"], "8");
}

/// Varnish's v00009 / v00011: `ban()` and `std.ban()` refuse with Varnish's words, an unset
/// argument is "Null argument", `std.ban_error()` says why (empty after a ban that was
/// added), and each refusal is a `VCL_Error` line.
#[test]
fn varnish_v00009_ban_errors_and_std_ban_error() {
    let p = program(
        r#"sub vcl_recv {
            set req.http.b1 = std.ban(req.http.doesntexist);
            set req.http.b1e = std.ban_error();
            set req.http.b2 = std.ban("req.url //");
            set req.http.b2e = std.ban_error();
            ban("obj.age // 4");
            set req.http.b3e = std.ban_error();
            set req.http.b4 = std.ban("req.url ~ ^/$");
            set req.http.b4e = std.ban_error();
            return (hash);
        }"#,
    );
    let mut e = env("/", &[]);
    assert_eq!(run(&p, Method::Recv, &mut e), Verdict::Hash);
    assert_eq!(e.headers["b1"], "false");
    assert_eq!(e.headers["b1e"], "Null argument");
    assert_eq!(e.headers["b2"], "false");
    assert_eq!(e.headers["b2e"], "refused \"req.url //\"");
    assert_eq!(e.headers["b3e"], "refused \"obj.age // 4\"");
    assert_eq!(e.headers["b4"], "true");
    assert_eq!(e.headers.get("b4e").map(String::as_str), Some(""));
    assert_eq!(*e.bans.borrow(), ["req.url ~ ^/$"]);
    let errors = e.state.errors.lock().map(|v| v.clone()).unwrap_or_default();
    assert_eq!(
        errors,
        [
            "ban(): Null argument",
            "ban(): refused \"req.url //\"",
            "ban(): refused \"obj.age // 4\"",
        ]
    );
}

#[test]
fn cookie_jar_ban_and_log() {
    let p = program(
        r#"sub vcl_recv {
            cookie.parse(req.http.cookie);
            cookie.keep_re("^(SESS|lang)");
            set req.http.cookie = cookie.get_string();
            if (cookie.isset("lang")) { set req.http.lang = cookie.get("lang"); }
            std.log("kept " + req.http.cookie);
            ban("req.url ~ " + req.url);
            if (client.ip ~ office) { set req.http.office = "yes"; }
            return (hash);
        }
        acl office { "10.0.0.0"/8; }"#,
    );
    let mut e = env("/p", &[("cookie", "_ga=1; SESS1=a; lang=fr; x=2")]);
    assert_eq!(run(&p, Method::Recv, &mut e), Verdict::Hash);
    assert_eq!(e.headers["cookie"], "SESS1=a; lang=fr");
    assert_eq!(e.headers["lang"], "fr");
    assert_eq!(e.logged, ["kept SESS1=a; lang=fr"]);
    assert_eq!(*e.bans.borrow(), ["req.url ~ /p"]);
    assert_eq!(e.headers["office"], "yes");
}

#[test]
fn purge_vmod_calls_carry_their_defaults() {
    let p = program(
        r#"sub vcl_hit {
            if (req.url == "/hard") { set req.http.n = purge.hard(); }
            elsif (req.url == "/soft") { purge.soft(); }
            else { set req.http.n = purge.soft(ttl = 5s, keep = 1d); }
            return (synth(200));
        }"#,
    );
    let mut e = env("/hard", &[]);
    run(&p, Method::Hit, &mut e);
    assert_eq!(e.headers["n"], "1");
    assert_eq!(*e.purges.borrow(), [None]);
    let mut e = env("/soft", &[]);
    run(&p, Method::Hit, &mut e);
    let soft = |ttl, grace, keep| Some(SoftPurge { ttl, grace, keep });
    assert_eq!(*e.purges.borrow(), [soft(0.0, -1.0, -1.0)]);
    let mut e = env("/x", &[]);
    run(&p, Method::Hit, &mut e);
    assert_eq!(*e.purges.borrow(), [soft(5.0, -1.0, 86400.0)]);
}

/// A fast hit caches what vcl_deliver adds when its outcome is the same on every hit:
/// `obj.hits` compared with 0 is (a hit counts at least 1), the count itself is not.
#[test]
fn obj_hits_compared_with_zero_is_fixed_on_a_hit() {
    let only = |s: Slot| matches!(s, Slot::RespHttp);
    let test = program(
        "sub vcl_deliver { if (obj.hits > 0) { set resp.http.x-cache = \"HIT\"; } \
         if (0 == obj.hits) { set resp.http.x-miss = \"1\"; } }",
    );
    assert!(test.reads_only(Method::Deliver, true, &only));
    assert!(!test.reads_only(Method::Deliver, false, &only));
    let count = program("sub vcl_deliver { set resp.http.x-hits = obj.hits; }");
    assert!(!count.reads_only(Method::Deliver, true, &only));
    let other = program("sub vcl_deliver { if (obj.hits > 1) { set resp.http.x-hot = \"1\"; } }");
    assert!(!other.reads_only(Method::Deliver, true, &only));
}

/// Varnish's arithmetic on sizes (vcc_expr.c; trunk i00001 multiplies
/// `storage.Transient.free_space` by 10): a size scaled by an INT or a REAL is a size, two
/// sizes divide to a REAL, and a size out of range fails the subroutine as an overflow does.
#[test]
fn sizes_scale_by_numbers_and_divide_to_a_ratio() {
    let p = program(
        r#"sub vcl_recv {
            set req.http.twice = 1KB * 2;
            set req.http.thrice = 3 * 1KB;
            set req.http.half = 1KB * 0.5;
            set req.http.quarter = 1MB / 4;
            set req.http.ratio = 1MB / 1KB;
            if (req.url == "/over") { set req.http.over = 1MB * 100000000000000; }
            if (req.url == "/neg") { set req.http.neg = 1KB * -1; }
        }"#,
    );
    let mut e = env("/", &[]);
    assert_eq!(run(&p, Method::Recv, &mut e), Verdict::Hash);
    assert_eq!(e.headers["twice"], "2048");
    assert_eq!(e.headers["thrice"], "3072");
    assert_eq!(e.headers["half"], "512");
    assert_eq!(e.headers["quarter"], "262144");
    assert_eq!(e.headers["ratio"], "1024.000");
    for url in ["/over", "/neg"] {
        match run(&p, Method::Recv, &mut env(url, &[])) {
            Verdict::Fail(why) => assert!(why.contains("size out of range"), "{url}: {why}"),
            other => panic!("{url}: {other:?}"),
        }
    }
}

/// Varnish's `VRT_INT_string` / `VRT_REAL_string` (trunk i00001): a number written as a
/// string must fit RFC 8941's sf-integer (15 digits) or sf-decimal (12 integer digits); one
/// past it fails the subroutine with Varnish's words, also inside a concatenation. The
/// largest that fit are written.
#[test]
fn numbers_past_the_sf_range_fail_when_written_as_strings() {
    let p = program(
        r#"sub vcl_recv {
            set req.http.int-max = 999999999999999;
            set req.http.real-max = 999999999999.999;
            set req.http.dur = 10s * 99999999999;
            if (req.url == "/real") { set req.http.x = 10s * 10000000000000; }
            if (req.url == "/int") { set req.http.x = 999999999999999 * 10; }
            if (req.url == "/neg") { set req.http.x = "n" + (0 - 999999999999999 - 1); }
            if (req.url == "/bytes") { set req.http.x = 1GB * 1000000; }
        }"#,
    );
    let mut e = env("/", &[]);
    assert_eq!(run(&p, Method::Recv, &mut e), Verdict::Hash);
    assert_eq!(e.headers["int-max"], "999999999999999");
    assert_eq!(e.headers["real-max"], "999999999999.999");
    assert_eq!(e.headers["dur"], "999999999990.000");
    for (url, words) in [
        ("/real", "REAL overflow converting to string (1.000000e+14)"),
        ("/int", "INT overflow converting to string ("),
        (
            "/neg",
            "INT overflow converting to string (FFFC72815B398000)",
        ),
        ("/bytes", "INT overflow converting to string ("),
    ] {
        match run(&p, Method::Recv, &mut env(url, &[])) {
            Verdict::Fail(why) => assert!(why.contains(words), "{url}: {why}"),
            other => panic!("{url}: {other:?}"),
        }
    }
}
