//! Parses and checks every VCL in Varnish's own test suite (../shared/varnishtest) and holds
//! the rates.
//!
//! The VTC files give VCL to `varnish vN -vcl {...}`, `-vcl+backend {...}` (the harness puts
//! a backend for each server declared before it first), `-errvcl MSG {...}` and 2.x
//! `-badvcl {...}` (which Varnish must refuse). Every accepted snippet must parse and must not
//! be called invalid by the checker (it may be refused as unsupported); the refused ones count
//! how many the parser alone and the checker refuse. Run with `--nocapture` for the
//! per-folder table and failures, with `SHELLAC_VCL_VERBOSE=1` also for what is refused as
//! unsupported and the refused snippets the checker lets through.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use shellac::vcl::load::load_text;
use shellac::vcl::{ErrorKind, Options, VclError, compile_with, parse};

/// One VCL given to a `varnish` command.
struct Snippet {
    file: String,
    /// The command expects Varnish to refuse it.
    refused: bool,
    vcl: String,
    /// Unused declarations are errors (the file does not turn vcc's err_unref off).
    err_unref: bool,
}

/// A word or `{...}` block of a VTC command, as vtc.c splits a line.
fn vtc_commands(text: &str) -> Vec<Vec<(String, bool)>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut cmd: Vec<(String, bool)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if b.get(i + 1) == Some(&b'\n') => i += 2,
            b'\n' => {
                if !cmd.is_empty() {
                    out.push(std::mem::take(&mut cmd));
                }
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'#' if cmd.is_empty() => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                cmd.push((text[start..i.min(b.len())].to_string(), false));
                i += 1;
            }
            b'{' => {
                let start = i + 1;
                let mut depth = 0;
                while i < b.len() {
                    // vtc.c counts every brace inside a block, escaped or not.
                    match b[i] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                cmd.push((text[start..i.min(b.len())].to_string(), true));
                i += 1;
            }
            _ => {
                let start = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                cmd.push((text[start..i].to_string(), false));
            }
        }
    }
    if !cmd.is_empty() {
        out.push(cmd);
    }
    out
}

/// The VTC macros' values, plausible enough for a parser (addresses, ports, paths).
fn expand_macros(vcl: &str) -> String {
    // A server's `${sN_sock}` in a `.path` is its Unix socket's path (`server -listen PATH`).
    let path = regex::Regex::new(r#"(\.path\s*=\s*")\$\{([A-Za-z0-9_]+)\}"#).expect("valid regex");
    let vcl = path.replace_all(vcl, "${1}/tmp/vtc/${2}");
    let re = regex::Regex::new(r"\$\{([A-Za-z0-9_]+)\}").expect("valid regex");
    re.replace_all(&vcl, |c: &regex::Captures| {
        let name = &c[1];
        if name.ends_with("_addr") || name == "localhost" || name == "bad_ip" {
            "127.0.0.1".to_string()
        } else if name.ends_with("_port") {
            "8080".to_string()
        } else if name.ends_with("_sock") || name == "bad_backend" || name == "listen_addr" {
            "127.0.0.1 8080".to_string()
        } else if name.ends_with("_name") {
            "v1".to_string()
        } else {
            format!("/tmp/vtc/{name}")
        }
    })
    .into_owned()
}

/// Every VCL snippet of one .vtc file. `modern`: trunk, whose harness writes `vcl 4.x;` first.
fn snippets(path: &Path, modern: bool) -> Vec<Snippet> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut out = Vec::new();
    // `-vcl+backend` declares a backend for every server declared before it, in order.
    let mut servers: Vec<String> = Vec::new();
    // Unused declarations are errors unless the test turns vcc's err_unref off.
    let mut err_unref = true;
    for cmd in vtc_commands(&text) {
        // `param.set vcc_feature +err_unref` or `-p vcc_feature=-err_unref`, in order.
        for (word, _) in &cmd {
            if word.contains("+err_unref") {
                err_unref = true;
            } else if word.contains("-err_unref") {
                err_unref = false;
            }
        }
        if cmd.first().map(|w| w.0.as_str()) == Some("server")
            && let Some((name, false)) = cmd.get(1)
            && !servers.contains(name)
            && !name.starts_with('-')
        {
            servers.push(name.clone());
        }
        if cmd.first().map(|w| w.0.as_str()) != Some("varnish") {
            continue;
        }
        let mut syntax = "4.1".to_string();
        let mut i = 1;
        while i < cmd.len() {
            let (word, _) = &cmd[i];
            let (refused, backend, skip) = match word.as_str() {
                "-syntax" => {
                    syntax = cmd.get(i + 1).map(|w| w.0.clone()).unwrap_or_default();
                    i += 2;
                    continue;
                }
                "-vcl" => (false, false, 1),
                "-vcl+backend" => (false, true, 1),
                "-errvcl" => (true, false, 2),
                "-badvcl" => (true, false, 1),
                _ => {
                    i += 1;
                    continue;
                }
            };
            let Some((body, true)) = cmd.get(i + skip) else {
                i += 1;
                continue;
            };
            let body = expand_macros(body);
            let mut vcl = String::new();
            if modern && !body.trim_start().starts_with("vcl ") {
                vcl.push_str(&format!("vcl {syntax};\n"));
            }
            if backend {
                for s in &servers {
                    vcl.push_str(&format!(
                        "backend {s} {{ .host = \"127.0.0.1\"; .port = \"8080\"; }}\n"
                    ));
                }
            }
            vcl.push_str(&body);
            out.push(Snippet {
                file: file.clone(),
                refused,
                vcl,
                err_unref,
            });
            i += skip + 1;
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    ok: usize,
    total: usize,
    refused_total: usize,
    refused_by_parser: usize,
    /// Accepted snippets the checker passes.
    checked: usize,
    /// Accepted snippets refused only as `Unsupported` (valid VCL Shellac does not run).
    unsupported: usize,
    /// Refused snippets the checker refuses as invalid.
    refused_by_checker: usize,
    /// Refused snippets the checker refuses only as unsupported.
    refused_unsupported: usize,
    /// Snippets that include files the VTC writes when it runs (left to the VTC runner).
    needs_files: usize,
}

fn corpus() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/varnishtest");
    dir.is_dir().then_some(dir)
}

#[test]
fn varnish_test_suite_vcl_parses() {
    let Some(root) = corpus() else {
        eprintln!("../shared/varnishtest is absent: nothing to parse");
        return;
    };
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut check_failures = Vec::new();
    let mut unsupported = Vec::new();
    let mut missed = Vec::new();
    // SHELLAC_VCL_VERBOSE=1 also lists what the checker refuses as unsupported, and the
    // refused snippets it lets through.
    let verbose = std::env::var_os("SHELLAC_VCL_VERBOSE").is_some();
    for tree in ["2.1.5", "trunk"] {
        let Ok(dir) = std::fs::read_dir(root.join(tree)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for path in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let is_vtc = name.ends_with(".vtc");
            let found = if is_vtc {
                snippets(&path, tree == "trunk")
            } else if name.ends_with(".vcl") {
                let vcl = std::fs::read_to_string(&path).unwrap_or_default();
                vec![Snippet {
                    file: name.clone(),
                    refused: false,
                    vcl,
                    err_unref: true,
                }]
            } else {
                continue;
            };
            let letter = name.chars().next().unwrap_or('?');
            let tally = tallies.entry(format!("{tree}/{letter}")).or_default();
            for s in found {
                let result = parse(&s.file, &s.vcl);
                let options = Options {
                    err_unref: s.err_unref,
                    ..Options::default()
                };
                let checked =
                    load_text(&s.file, &s.vcl, None).and_then(|src| compile_with(&src, &options));
                // An include of a file the VTC writes at run time: only the runner can check it.
                let needs_files = matches!(&checked, Err(errs)
                    if errs.iter().any(|e| e.message.contains("include")));
                tally.needs_files += usize::from(needs_files);
                let invalid =
                    |errs: &Vec<VclError>| errs.iter().any(|e| e.kind == ErrorKind::Invalid);
                if s.refused {
                    tally.refused_total += 1;
                    tally.refused_by_parser += usize::from(result.is_err());
                    match &checked {
                        _ if needs_files => {}
                        Err(errs) if invalid(errs) => tally.refused_by_checker += 1,
                        Err(errs) => {
                            tally.refused_unsupported += 1;
                            if verbose {
                                missed.push(format!(
                                    "{tree}/{} (refused only as unsupported: {})",
                                    s.file,
                                    errs.first().map(|e| e.message.as_str()).unwrap_or("")
                                ));
                            }
                        }
                        Ok(_) => {
                            if verbose {
                                missed.push(format!("{tree}/{}\n{}", s.file, s.vcl));
                            }
                        }
                    }
                } else {
                    tally.total += 1;
                    match result {
                        Ok(_) => tally.ok += 1,
                        Err(e) => {
                            let line = s.vcl.lines().nth(e.pos.line as usize - 1).unwrap_or("");
                            failures.push(format!("{tree}/{e}\n    | {}", line.trim()));
                        }
                    }
                    match checked {
                        _ if needs_files => {}
                        Ok(_) => tally.checked += 1,
                        Err(errs) if !invalid(&errs) => {
                            tally.unsupported += 1;
                            if verbose {
                                for e in &errs {
                                    unsupported.push(format!("{tree}/{e}"));
                                }
                            }
                        }
                        Err(errs) => {
                            for e in errs.iter().filter(|e| e.kind == ErrorKind::Invalid) {
                                let line = s
                                    .vcl
                                    .lines()
                                    .nth((e.pos.line as usize).saturating_sub(1))
                                    .unwrap_or("");
                                check_failures.push(format!("{tree}/{e}\n    | {}", line.trim()));
                            }
                        }
                    }
                }
            }
        }
    }
    let mut all = Tally::default();
    println!(
        "{:<10} {:>15} {:>15} {:>12} {:>17} {:>17} {:>12}",
        "folder",
        "-vcl parsed",
        "checked",
        "unsupported",
        "-errvcl parser",
        "-errvcl checker",
        "(unsupp.)"
    );
    let row = |name: &str, t: &Tally| {
        println!(
            "{name:<10} {:>6} / {:<6} {:>6} / {:<6} {:>12} {:>7} / {:<7} {:>7} / {:<7} {:>12}",
            t.ok,
            t.total,
            t.checked,
            t.total,
            t.unsupported,
            t.refused_by_parser,
            t.refused_total,
            t.refused_by_checker,
            t.refused_total,
            t.refused_unsupported
        )
    };
    for (folder, t) in &tallies {
        row(folder, t);
        all.ok += t.ok;
        all.total += t.total;
        all.refused_total += t.refused_total;
        all.refused_by_parser += t.refused_by_parser;
        all.checked += t.checked;
        all.unsupported += t.unsupported;
        all.refused_by_checker += t.refused_by_checker;
        all.refused_unsupported += t.refused_unsupported;
        all.needs_files += t.needs_files;
    }
    row("all", &all);
    println!(
        "(snippets including files the VTC writes at run time: {})",
        all.needs_files
    );
    for f in &failures {
        println!("FAIL {f}");
    }
    for f in &check_failures {
        println!("CHECK {f}");
    }
    for f in &unsupported {
        println!("UNSUPPORTED {f}");
    }
    for f in &missed {
        println!("MISSED {f}");
    }
    assert!(
        all.total > 500,
        "the corpus gave only {} snippets",
        all.total
    );
    // Measured when this test was written (806 of 806 parse; the parser alone refuses 60 of
    // the 365 snippets Varnish refuses): anything less is a regression.
    assert_eq!(
        all.ok, all.total,
        "VCL snippets Varnish accepts no longer parse"
    );
    assert!(
        all.refused_by_parser >= 60,
        "the parser refuses only {} of the snippets Varnish refuses (was 60)",
        all.refused_by_parser
    );
    // The checker: no snippet Varnish accepts is called invalid (a valid one may be refused as
    // unsupported: a VMOD or feature Shellac does not have), and it refuses as invalid at
    // least the 316 of the 365 snippets Varnish refuses it did when this was written.
    assert!(
        check_failures.is_empty(),
        "the checker calls {} accepted snippets invalid",
        check_failures.len()
    );
    assert!(
        all.refused_by_checker >= 316,
        "the checker refuses only {} of the snippets Varnish refuses (was 316)",
        all.refused_by_checker
    );
}

/// Every `sub` of a parsed file with how many statements it has at its top level.
fn subs(vcl: &shellac::vcl::ast::Vcl) -> Vec<(String, usize)> {
    use shellac::vcl::ast::Decl;
    vcl.decls
        .iter()
        .filter_map(|d| match d {
            Decl::Sub { name, body, .. } => Some((name.clone(), body.len())),
            _ => None,
        })
        .collect()
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vcl")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The shapes of a 4.x WordPress-guide file: probe with a concatenated request, directors
/// built in vcl_init, purge ACL, cookie regexes, long-string synthetic bodies.
#[test]
fn wordpress_style_4x_configuration_parses() {
    use shellac::vcl::ast::{Decl, Expr, FieldValue, Stmt};
    let vcl =
        parse("wordpress-4.vcl", &fixture("wordpress-4.vcl")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(vcl.version.as_ref().map(|v| v.0.as_str()), Some("4.1"));
    assert_eq!(
        subs(&vcl),
        [
            ("vcl_init".to_string(), 3),
            ("vcl_recv".to_string(), 12),
            ("vcl_hash".to_string(), 3),
            ("vcl_backend_response".to_string(), 7),
            ("vcl_deliver".to_string(), 4),
            ("vcl_synth".to_string(), 4),
        ]
    );
    let Some(Decl::Probe { fields, .. }) =
        vcl.decls.iter().find(|d| matches!(d, Decl::Probe { .. }))
    else {
        panic!("no probe")
    };
    // The three juxtaposed request lines stay three lines.
    assert!(matches!(
        &fields[0].value,
        FieldValue::Expr(Expr::Concat { parts, .. }) if parts.len() == 3
    ));
    let Some(Decl::Acl { entries, .. }) = vcl.decls.iter().find(|d| matches!(d, Decl::Acl { .. }))
    else {
        panic!("no acl")
    };
    assert_eq!(entries.iter().filter(|e| e.negated).count(), 1);
    let Some(Decl::Sub { body, .. }) = vcl
        .decls
        .iter()
        .find(|d| matches!(d, Decl::Sub { name, .. } if name == "vcl_init"))
    else {
        panic!("no vcl_init")
    };
    assert!(matches!(&body[0], Stmt::New { name, .. } if name == "cluster"));
    assert!(
        matches!(&body[1], Stmt::Expr { expr: Expr::Call { func, .. }, .. } if func == "cluster.add_backend")
    );
}

/// The shapes of a 2.1 file: inline probes, random and round-robin directors (one with an
/// inline backend), `req.request`, `set req.hash +=`, bare actions, `error`, 2.x juxtaposed
/// synthetic body.
#[test]
fn classic_21_configuration_parses() {
    use shellac::vcl::ast::{Decl, Stmt};
    let vcl =
        parse("classic-2.1.vcl", &fixture("classic-2.1.vcl")).unwrap_or_else(|e| panic!("{e}"));
    assert!(vcl.version.is_none());
    let directors: Vec<(&str, usize)> = vcl
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Director { kind, members, .. } => Some((kind.as_str(), members.len())),
            _ => None,
        })
        .collect();
    assert_eq!(directors, [("random", 2), ("round-robin", 2)]);
    assert_eq!(
        subs(&vcl),
        [
            ("vcl_recv".to_string(), 8),
            ("vcl_hash".to_string(), 3),
            ("vcl_fetch".to_string(), 7),
            ("vcl_deliver".to_string(), 3),
            ("vcl_error".to_string(), 3),
        ]
    );
    let Some(Decl::Sub { body, .. }) = vcl
        .decls
        .iter()
        .find(|d| matches!(d, Decl::Sub { name, .. } if name == "vcl_error"))
    else {
        panic!("no vcl_error")
    };
    assert!(
        matches!(&body[1], Stmt::Action { name, args, .. } if name == "synthetic" && args.len() == 1)
    );
    assert!(
        matches!(&body[2], Stmt::Action { name, args, .. } if name == "deliver" && args.is_empty())
    );
}
