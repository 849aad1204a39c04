//! Edge Side Includes end to end (issue 29, docs/esi.md): a real origin, the real proxy.
//! Pages nested, failing, looping and cross-host; `alt` and `onerror`; the sub-requests'
//! hygiene; includes fetched in parallel (shown by what the origin saw while no fragment had
//! finished, not by timing); parsed once (the counters); VCL's `do_esi` and `req.esi_level`.

mod assembly;
#[path = "../common/mod.rs"]
mod common;
mod stored;
mod streaming;
mod vcl;

use std::sync::Arc;
use std::time::Duration;

use common::vcl::start_vcl;
use common::*;
use http_body_util::BodyExt;
use shellac::config::Config;
use shellac::config::rules::RuleConfig;
use tokio::sync::Notify;

/// The origin every test shares the shape of: pages and fragments by path.
fn site(s: &Seen) -> Reply {
    let page = |body: &str| {
        Reply::ok(body)
            .cc("max-age=60")
            .header("content-type", "text/html")
    };
    match s.path.as_str() {
        "/page" => page(r#"<html><esi:include src="/a"/>-<esi:include src="b"/></html>"#),
        "/a" => page("A"),
        "/b" => page("B"),
        "/nested" => page(r#"<p>[<esi:include src="/mid"/>]"#),
        "/mid" => page(r#"<b>(<esi:include src="/a"/><esi:remove>gone</esi:remove>)"#),
        "/loop" => page(r#"<x><esi:include src="/loop"/>y"#),
        "/bad" => Reply::ok("broken").status(500),
        "/missing" => Reply::ok("not here").status(404),
        "/alt" => page("ALT"),
        "/with-alt" => page(r#"<p><esi:include src="/bad" alt="/alt"/></p>"#),
        "/continue" => page(r#"<p>1<esi:include src="/bad" onerror="continue"/>2</p>"#),
        "/first-fails" => page(r#"<esi:include src="/bad"/><p>rest</p>"#),
        "/late-fails" => page(r#"<p>start<esi:include src="/bad"/>end</p>"#),
        "/404-alt" => page(r#"<p><esi:include src="/missing" alt="/alt"/></p>"#),
        "/cross" => page(
            r#"<p><esi:include src="http://evil.example/steal" onerror="continue"/><esi:include src="http://frag.example/a"/></p>"#,
        ),
        "/sc" => Reply::ok(r#"<p><esi:include src="/a"/></p>"#)
            .cc("max-age=0")
            .header(
                "surrogate-control",
                r#"content="ESI/1.0";shellac, max-age=120, no-store;cdn"#,
            ),
        "/json" => Reply::ok(r#"{"a": "<esi:include src=/a/>"}"#).cc("max-age=60"),
        "/malformed" => page(r#"<p><esi:include/>ok</p>"#),
        "/short" => Reply::ok(r#"<p><esi:include src="/short-frag"/></p>"#).cc("max-age=300"),
        "/short-frag" => Reply::ok("S").cc("max-age=5"),
        "/hygiene" => page(r#"<esi:include src="/echo"/>"#),
        "/echo" => Reply::ok("E").cc("no-store"),
        // Long enough for `[compression]` to gzip an identity page at fetch.
        "/big" => page(&format!(
            "<html>{}<esi:include src=\"/a\"/>{}</html>",
            "x".repeat(600),
            "y".repeat(600)
        )),
        "/gz" => Reply {
            body: ReplyBody::Bytes(gzip(
                br#"<p><esi:include src="/a"/>:<esi:include src="/gzfrag"/></p>"#,
            )),
            ..page("")
        }
        .header("content-encoding", "gzip"),
        "/gzfrag" => Reply {
            body: ReplyBody::Bytes(gzip(b"G")),
            ..page("")
        }
        .header("content-encoding", "gzip"),
        _ => Reply::ok("?").status(404),
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// ESI on for every response (a rule with `esi = true` and no matcher).
fn esi_rule(config: &mut Config) {
    config.rules.push(RuleConfig {
        name: "esi".into(),
        esi: true,
        ..Default::default()
    });
}

/// ESI on for the paths `path` (a regex) matches only.
fn esi_on(config: &mut Config, path: &str) {
    config.rules.push(RuleConfig {
        name: "esi".into(),
        path: Some(path.into()),
        esi: true,
        ..Default::default()
    });
}

async fn get_text(shellac: &Shellac, path: &str) -> (u16, String) {
    let r = get(shellac.addr, path).await;
    (r.status, r.text())
}

fn gunzip(data: &[u8]) -> String {
    use std::io::Read;
    let mut out = String::new();
    flate2::read::GzDecoder::new(data)
        .read_to_string(&mut out)
        .expect("a whole gzip stream");
    out
}
