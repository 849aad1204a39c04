//! Parses every VCL in Varnish's own test suite (../shared/varnishtest) and holds the rate.
//!
//! The VTC files give VCL to `varnish vN -vcl {...}`, `-vcl+backend {...}` (the harness puts
//! the test's backends first), `-errvcl MSG {...}` and 2.x `-badvcl {...}` (which Varnish must
//! refuse; many for reasons a checker finds later, so they only report how many the parser
//! alone refuses). Run with `--nocapture` for the per-folder table and the failures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use shellac::vcl::parse;

/// One VCL given to a `varnish` command.
struct Snippet {
    file: String,
    /// The command expects Varnish to refuse it.
    refused: bool,
    vcl: String,
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
    let re = regex::Regex::new(r"\$\{([A-Za-z0-9_]+)\}").expect("valid regex");
    re.replace_all(vcl, |c: &regex::Captures| {
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
    for cmd in vtc_commands(&text) {
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
                vcl.push_str("backend s1 { .host = \"127.0.0.1\"; .port = \"8080\"; }\n");
            }
            vcl.push_str(&body);
            out.push(Snippet {
                file: file.clone(),
                refused,
                vcl,
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
                }]
            } else {
                continue;
            };
            let letter = name.chars().next().unwrap_or('?');
            let tally = tallies.entry(format!("{tree}/{letter}")).or_default();
            for s in found {
                let result = parse(&s.file, &s.vcl);
                if s.refused {
                    tally.refused_total += 1;
                    tally.refused_by_parser += usize::from(result.is_err());
                } else {
                    tally.total += 1;
                    match result {
                        Ok(_) => tally.ok += 1,
                        Err(e) => {
                            let line = s.vcl.lines().nth(e.pos.line as usize - 1).unwrap_or("");
                            failures.push(format!("{tree}/{e}\n    | {}", line.trim()));
                        }
                    }
                }
            }
        }
    }
    let mut all = Tally::default();
    println!(
        "{:<10} {:>14} {:>24}",
        "folder", "-vcl parsed", "-errvcl refused by parser"
    );
    for (folder, t) in &tallies {
        println!(
            "{folder:<10} {:>6} / {:<6} {:>12} / {:<6}",
            t.ok, t.total, t.refused_by_parser, t.refused_total
        );
        all.ok += t.ok;
        all.total += t.total;
        all.refused_total += t.refused_total;
        all.refused_by_parser += t.refused_by_parser;
    }
    println!(
        "{:<10} {:>6} / {:<6} {:>12} / {:<6}",
        "all", all.ok, all.total, all.refused_by_parser, all.refused_total
    );
    for f in &failures {
        println!("FAIL {f}");
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
}
