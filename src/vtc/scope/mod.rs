//! Before a file runs: does it need something out of scope? A file that does is reported as
//! skipped with the first such thing — whatever it would have done before reaching it — and
//! never run: Varnish-internal VMODs (`debug`, `vtc`), varnishd's own processes and shell
//! (`shell`, `process`), `varnishlog`, `logexpect` on a tag Shellac does not log, jails, HTTP/2 frames, and every
//! command, option, parameter or counter the runner has no Shellac equivalent for. The same
//! tables decide at run time; this pass only finds them all before any process starts.

mod refused;
mod varnish;

use super::context::{FEATURES, Flavour};
use super::lex::{self, Command};
use super::outcome::Wiring;

pub(super) use refused::refused;
pub(super) use varnish::vcl;

/// Top-level commands outside what the runner covers.
const OUT_TOP: &[(&str, &str)] = &[
    ("shell", "shell commands (`shell`)"),
    ("process", "background processes (`process`)"),
    ("varnishlog", "VSL log expectations (`varnishlog`)"),
    ("haproxy", "HAProxy (`haproxy`)"),
    ("syslog", "syslog servers (`syslog`)"),
    ("tunnel", "TCP tunnels (`tunnel`)"),
    ("filewrite", "file writes (`filewrite`)"),
    ("setenv", "environment changes (`setenv`)"),
    ("random", "Varnish's random number sequence (`random`)"),
];

/// The gzip options of `txreq` / `txresp` the runner does (`-gzipresidual`, which shapes
/// the last deflate block, is not).
const GZIP_OPTIONS: &[&str] = &["-gzipbody", "-gziplen", "-gziplevel"];

/// Spec commands outside what the runner covers.
const OUT_SPEC: &[(&str, &str)] = &[
    ("txpri", "HTTP/2 frames in VTC (txpri)"),
    ("rxpri", "HTTP/2 frames in VTC (rxpri)"),
    ("stream", "HTTP/2 frames in VTC (stream)"),
    ("settings", "HTTP/2 frames in VTC (settings)"),
    ("upgrade", "HTTP/2 frames in VTC (upgrade)"),
];

/// The spec commands the runner does.
const SPEC: &[&str] = &[
    "gunzip",
    "gunzip_body",
    "txreq",
    "txresp",
    "rxreq",
    "rxreqhdrs",
    "rxhdrs",
    "rxreqbody",
    "rxbody",
    "rxresp",
    "rxresphdrs",
    "rxrespbody",
    "rxchunk",
    "expect",
    "expect_pattern",
    "expect_close",
    "send",
    "send_n",
    "send_urgent",
    "sendhex",
    "recv",
    "chunked",
    "chunkedlen",
    "timeout",
    "fatal",
    "non_fatal",
    "close",
    "shutdown",
    "accept",
    "write_body",
    "delay",
    "loop",
    "barrier",
    "sema",
];

/// Why the file is out of scope, or `None`. `wiring`: what `shellac` can do with VCL.
pub fn out_of_scope(cmds: &[Command], flavour: Flavour, wiring: Wiring) -> Option<String> {
    for c in cmds {
        if let Some(r) = top(c, flavour, wiring) {
            if r.contains("(line ") {
                return Some(r);
            }
            return Some(format!("{r} (line {})", c.line));
        }
    }
    None
}

fn top(c: &Command, flavour: Flavour, wiring: Wiring) -> Option<String> {
    let name = c.name();
    if let Some((_, why)) = OUT_TOP.iter().find(|(n, _)| *n == name) {
        return Some(why.to_string());
    }
    let words: Vec<&str> = c.words.iter().map(|w| w.text.as_str()).collect();
    match name {
        "feature" => {
            // `feature cmd CMD`: the command decides, when the file runs.
            if words.get(1) == Some(&"cmd") {
                return None;
            }
            if let Some(f) = words[1..].iter().find(|f| !FEATURES.contains(f)) {
                return Some(format!("feature {f}"));
            }
            None
        }
        "server" | "client" => {
            let mut i = 2;
            while i < c.words.len() {
                let w = &c.words[i];
                if w.block || !w.text.starts_with('-') {
                    if let Some(r) = spec(&w.text, w.line) {
                        return Some(r);
                    }
                } else if matches!(
                    w.text.as_str(),
                    "-connect" | "-listen" | "-repeat" | "-rcvbuf" | "-proxy1" | "-proxy2"
                ) {
                    // The option's value.
                    i += 1;
                }
                i += 1;
            }
            None
        }
        "loop" => {
            let block = c.words.get(2)?;
            let inner = lex::split(&block.text, block.line).ok()?;
            out_of_scope(&inner, flavour, wiring)
        }
        "varnish" => varnish::command(c, wiring),
        "logexpect" => c
            .words
            .windows(2)
            .find(|w| w[0].text == "-q" && !w[0].block)
            .and_then(|w| super::logexp::unsupported_query(&w[1].text))
            .or_else(|| {
                c.words
                    .iter()
                    .find(|w| w.block)
                    .and_then(|b| super::logexp::unsupported(&b.text, b.line))
            }),
        _ => None,
    }
}

/// A client's or server's specification.
fn spec(text: &str, line: u32) -> Option<String> {
    let cmds = match lex::split(text, line) {
        Ok(c) => c,
        Err(e) => return Some(format!("VTC syntax the runner cannot split: {e}")),
    };
    for c in &cmds {
        let name = c.name();
        if let Some((_, why)) = OUT_SPEC.iter().find(|(n, _)| *n == name) {
            return Some(why.to_string());
        }
        if !SPEC.contains(&name) {
            return Some(format!(
                "VTC command {name:?} (line {}) is not implemented by the runner",
                c.line
            ));
        }
        for w in &c.words[1..] {
            if w.text.starts_with("-gzip") && !GZIP_OPTIONS.contains(&w.text.as_str()) {
                return Some(format!("gzip bodies in VTC ({})", w.text));
            }
            if w.text == "-up" && name == "txreq" {
                return Some("HTTP/2 upgrade in VTC (txreq -up)".into());
            }
        }
        if name == "loop"
            && let Some(b) = c.words.get(2)
            && let Some(r) = spec(&b.text, b.line)
        {
            return Some(r);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIRED: Wiring = Wiring {
        serve: true,
        check: true,
    };

    fn scope(src: &str) -> Option<String> {
        out_of_scope(&lex::split(src, 1).unwrap(), Flavour::Trunk, WIRED)
    }

    #[test]
    fn what_makes_a_file_skipped() {
        assert_eq!(
            scope("varnishtest \"x\"\nserver s1 { rxreq\n txresp } -start\n"),
            None
        );
        assert!(
            scope("varnishlog l1 -v v1 { }")
                .unwrap()
                .contains("varnishlog")
        );
        assert_eq!(scope("logexpect l1 -v v1 { expect * * ReqURL / }"), None);
        // A query the runner cannot run skips the file before it runs (trunk l00001 waited
        // on its earlier logexpects until its time limit).
        assert!(
            scope("logexpect l1 -d 1 -g vxid -q \"RespHeader[2] == 123\" {\n expect 0 * Begin req\n} -run")
                .unwrap()
                .contains("field indexes")
        );
        assert_eq!(
            scope(
                "logexpect l1 -d 1 -g vxid -q \"RespStatus == 200\" {\n expect 0 * Begin req\n} -run"
            ),
            None
        );
        assert!(
            scope("logexpect l1 -v v1 {\n expect * * SessOpen a0\n}")
                .unwrap()
                .contains("SessOpen")
        );
        assert!(
            scope("client c1 { txpri } -run")
                .unwrap()
                .contains("HTTP/2")
        );
        assert!(
            scope("varnish v1 -vcl { import vtc; }")
                .unwrap()
                .contains("vtc")
        );
        assert!(
            scope("varnish v1 -vcl+backend { import ${vmod_debug}; }")
                .unwrap()
                .contains("debug")
        );
        // `-proto PROXY` and a client's `-proxy1` run; vmod_proxy (the TLVs) does not.
        assert_eq!(
            scope(
                "varnish v1 -proto PROXY -vcl+backend {} -start\nclient c1 -proxy1 \"1.2.3.4:1 5.6.7.8:2\" {} -run"
            ),
            None
        );
        assert!(
            scope("varnish v2 -proto PROXY -vcl+backend { import proxy; }")
                .unwrap()
                .contains("VMOD proxy")
        );
        assert!(scope("varnish v1 -proto FOO -vcl+backend {}").is_some());
        assert!(scope("varnish v1 -expect SM?.s0.g_space == 0").is_some());
        assert_eq!(scope("varnish v1 -expect SM?.s0.g_bytes == 0"), None);
        assert_eq!(scope("varnish v1 -expect cache_hit == 1"), None);
        // A Unix socket listener runs (server.listen_unix); named and abstract ones do not.
        assert_eq!(
            scope("varnish v1 -arg \"-a ${tmpdir}/v1.sock -Wpoll\" -vcl+backend {} -start"),
            None
        );
        assert!(scope("varnish v1 -arg \"-a foo=${tmpdir}/v1.sock\" -start").is_some());
        assert!(scope("varnish v1 -arg \"-a @abstract\" -start").is_some());
        assert_eq!(
            scope("varnish v1 -cliok \"param.set thread_pools 1\""),
            None
        );
        // connect_timeout, send_timeout and pipe_timeout have settings now ([vcl]
        // connect_timeout, server.send_total_timeout, server.tunnel_idle_timeout);
        // backend_remote_error_holddown has none.
        assert_eq!(
            scope("varnish v1 -cliok \"param.set connect_timeout 1\""),
            None
        );
        assert_eq!(
            scope("varnish v1 -cliok \"param.set send_timeout 1\""),
            None
        );
        assert_eq!(
            scope("varnish v1 -cliok \"param.set pipe_timeout 1\""),
            None
        );
        assert!(
            scope("varnish v1 -cliok \"param.set backend_remote_error_holddown 1\"")
                .unwrap()
                .contains("backend_remote_error_holddown")
        );
        assert_eq!(scope("varnish v1 -cliok \"param.set default_ttl 1\""), None);
        assert!(scope("varnish v1 -arg \"-p debug=+slow_acceptor\"").is_some());
        assert_eq!(scope("varnish v1 -arg \"-s malloc,1m\""), None);
        assert!(scope("varnish v1 -cliexpect foo \"ban.list\"").is_some());
        assert_eq!(scope("feature cmd {test 1 = 1}"), None);
        assert!(scope("feature dns").is_some());
        for f in FEATURES {
            assert_eq!(scope(&format!("feature {f}")), None, "{f}");
        }
        assert!(
            scope("varnish v1 -badvcl { backend b1 { .host = \"v00002.freebsd.dk\"; } }")
                .unwrap()
                .contains("DNS")
        );
        assert_eq!(
            scope("varnish v1 -vcl { backend b { .host = \"${s1_addr}\"; .port = \"80\"; } }"),
            None
        );
        assert_eq!(
            scope("varnish v1 -vcl { backend b { .host = \"127.0.0.1:80\"; } }"),
            None
        );
        assert!(scope("loop 2 { client c1 { stream 1 { } -run } -run }").is_some());
        let unwired = Wiring {
            serve: false,
            check: false,
        };
        let cmds = lex::split("varnish v1 -vcl { } -start", 1).unwrap();
        assert!(
            out_of_scope(&cmds, Flavour::Trunk, unwired)
                .unwrap()
                .contains("not wired")
        );
    }
}
