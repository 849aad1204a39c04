//! Statements in the docs that a test can hold to the code (issue 23, defect 16: a dozen
//! sentences had drifted). Every counter or gauge the docs name where they say "counter
//! `x`" or "gauges `x` / `y`" must exist in a running instance's `/stats`; every TOML and VCL
//! example in README.md and docs/ must pass `shellac check` (issue 30: the migration guides
//! cannot rot), and docs/performance.md with its charts must be what bench/charts.py writes
//! from bench/RESULTS.md.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::binary::BIN;
use common::*;

/// The documents an operator reads.
const DOCS: &[&str] = &[
    "README.md",
    "SECURITY.md",
    "ARCHITECTURE.md",
    "docs/configuration.md",
    "docs/admin.md",
    "docs/policy.md",
    "docs/conformance.md",
    "docs/fleet.md",
    "docs/migrating-from-varnish.md",
    "docs/migrating-from-nginx.md",
    "docs/migrating-from-apache.md",
    "docs/sites.md",
];

/// Names in backticks after "counter(s)" or "gauge(s)", in lists joined by `,`, `/`, `and`,
/// `or`, `(of ...)` left out. `pass_reason_*`-style families are kept as prefixes.
fn named_counters(text: &str) -> Vec<String> {
    let text = text.to_lowercase();
    let text = text.as_str();
    let mut out = Vec::new();
    let words = ["counter ", "counters ", "gauge ", "gauges "];
    for w in words {
        let mut rest = text;
        while let Some(i) = rest.find(w) {
            rest = &rest[i + w.len()..];
            let mut list = rest;
            while let Some(after) = list.strip_prefix('`') {
                let Some(end) = after.find('`') else { break };
                let name = &after[..end];
                if name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'*')
                {
                    out.push(name.to_string());
                }
                list = after[end + 1..].trim_start();
                let mut joined = false;
                for sep in [",", "/", "and", "or", "+"] {
                    if let Some(l) = list.strip_prefix(sep) {
                        list = l.trim_start();
                        joined = true;
                        break;
                    }
                }
                if !joined {
                    break;
                }
            }
        }
    }
    out
}

#[test]
fn the_list_reader_reads_lists() {
    let mut names =
        named_counters("Counters `a_b` / `c_d`, `e` and `f_*`; counter `g`. gauge `h` (of `i`)");
    names.sort();
    assert_eq!(names, vec!["a_b", "c_d", "e", "f_*", "g", "h"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_counter_the_docs_name_exists() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let stats = shellac.stats_json().await;
    let metrics = String::from_utf8_lossy(&get(shellac.admin, "/metrics").await.body).into_owned();
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in DOCS {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/").to_string() + doc;
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
        for name in named_counters(&text) {
            checked += 1;
            let found = match name.strip_suffix('*') {
                Some(prefix) => {
                    stats.keys().any(|k| k.starts_with(prefix)) || metrics.contains(prefix)
                }
                None => stats.contains_key(&name) || metrics.contains(&format!("shellac_{name}")),
            };
            if !found {
                missing.push(format!("{doc}: `{name}`"));
            }
        }
    }
    assert!(
        checked >= 30,
        "only {checked} counter names found: the reader broke"
    );
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "counters named in the docs that /stats does not have:\n{}",
        missing.join("\n")
    );
    shellac.stop().await;
}

/// The marker that exempts one example from [`every_toml_and_vcl_example_passes_check`]: an
/// HTML comment (invisible when rendered, plain in the source) on the line right before the
/// fence, with the reason after the colon: `<!-- unchecked: a fragment of [[tls.acme]] -->`.
const UNCHECKED: &str = "<!-- unchecked:";

/// At most this many examples may carry [`UNCHECKED`]: a fragment can almost always be shown
/// as a whole file instead.
const MAX_UNCHECKED: usize = 3;

/// What a TOML example that shows one section alone (no `[[backend]]`, no `[vcl]`) is checked
/// with: the section plus this backend, so a rule naming `director = "app"` resolves.
const APPENDED_BACKEND: &str = "\n[[backend]]\nname = \"app\"\nhost = \"127.0.0.1\"\nport = 8080\n";

/// One fenced example: where it is, its language (`toml` or `vcl`) and its text.
struct Example {
    at: String,
    lang: &'static str,
    text: String,
    unchecked: Option<String>,
}

/// README.md and every Markdown file in docs/ (new guides are found without a list).
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    let dir = std::fs::read_dir(root.join("docs")).expect("read docs/");
    let mut more: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// The ```toml and ```vcl blocks of one Markdown text (the fence's first word is the language).
fn examples(name: &str, text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        let Some(info) = line.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let fence = &lines[i][..lines[i].len() - line.len()];
        let lang = match info.split_whitespace().next() {
            Some("toml") => Some("toml"),
            Some("vcl") => Some("vcl"),
            _ => None,
        };
        let start = i;
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i].strip_prefix(fence).unwrap_or(lines[i]));
            i += 1;
        }
        i += 1;
        let Some(lang) = lang else { continue };
        let unchecked = start
            .checked_sub(1)
            .and_then(|p| lines[p].trim().strip_prefix(UNCHECKED))
            .map(|r| r.trim_end_matches("-->").trim().to_string());
        out.push(Example {
            at: format!("{name}:{}", start + 1),
            lang,
            text: body.join("\n") + "\n",
            unchecked,
        });
    }
    out
}

#[test]
fn the_example_reader_reads_fences() {
    let md = "a\n```toml\n[x]\n```\n<!-- unchecked: why -->\n  ```vcl\n  vcl 4.1;\n  ```\n```sh\nls\n```\n";
    let ex = examples("m.md", md);
    assert_eq!(ex.len(), 2);
    assert_eq!(
        (ex[0].lang, ex[0].text.as_str(), ex[0].at.as_str()),
        ("toml", "[x]\n", "m.md:2")
    );
    assert_eq!((ex[1].lang, ex[1].text.as_str()), ("vcl", "vcl 4.1;\n"));
    assert_eq!(ex[1].unchecked.as_deref(), Some("why"));
}

/// Whether a TOML example is a whole file rather than one section shown alone.
fn is_whole_file(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim();
        l.starts_with("[[backend]]") || l == "[vcl]"
    })
}

/// `shellac check --file-only` (the file alone: its paths are the reader's machine's, not this
/// one's) on every example; a section shown alone gets [`APPENDED_BACKEND`].
#[test]
fn every_toml_and_vcl_example_passes_check() {
    let dir = std::env::temp_dir().join(format!("shellac-doc-examples-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut failures = Vec::new();
    let mut unchecked = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{doc:?}: {e}"));
        let name = doc
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(&doc)
            .display()
            .to_string();
        let name = name.trim_start_matches('/');
        for (n, ex) in examples(name, &text).into_iter().enumerate() {
            if let Some(reason) = ex.unchecked {
                assert!(
                    !reason.is_empty(),
                    "{}: `{UNCHECKED}` needs a reason",
                    ex.at
                );
                unchecked.push(format!("{} ({reason})", ex.at));
                continue;
            }
            checked += 1;
            let mut text = ex.text.clone();
            if ex.lang == "toml" && !is_whole_file(&text) {
                text.push_str(APPENDED_BACKEND);
            }
            let file = dir.join(format!("{}-{n}.{}", name.replace('/', "_"), ex.lang));
            std::fs::write(&file, &text).expect("write example");
            let mut cmd = Command::new(BIN);
            cmd.arg("check");
            if ex.lang == "toml" {
                cmd.arg("--file-only");
            }
            let out = cmd.arg(&file).output().expect("run shellac check");
            if !out.status.success() {
                failures.push(format!(
                    "{} ({}):\n{}{}",
                    ex.at,
                    ex.lang,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        checked >= 20,
        "only {checked} examples found: the reader broke"
    );
    assert!(
        unchecked.len() <= MAX_UNCHECKED,
        "more than {MAX_UNCHECKED} examples marked `{UNCHECKED} ...`: show them as whole files \
         instead:\n{}",
        unchecked.join("\n")
    );
    assert!(
        failures.is_empty(),
        "examples in the docs that `shellac check` refuses (a TOML block without [[backend]] \
         or [vcl] is checked with one backend `app` appended; a block that cannot be a file \
         gets `{UNCHECKED} REASON -->` on the line above its fence, at most {MAX_UNCHECKED} \
         in all):\n\n{}",
        failures.join("\n")
    );
}

/// docs/performance.md and docs/performance/*.svg are written by bench/charts.py from the
/// tables of bench/RESULTS.md; `--check` fails when they differ (a figure moved or changed in
/// the notebook, or the page edited by hand).
#[test]
fn the_performance_page_is_what_bench_charts_writes_from_results() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/charts.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg("--check")
        .output()
        .expect("run python3 bench/charts.py --check (python3 is needed, as for packaging/build-deb.sh)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every `section key` pair docs/configuration.md's generated tables hold (`<!-- settings
/// [server] -->` … `| \`listen\` |` … `<!-- /settings -->`): the setting definitions as the
/// reference shows them.
fn reference_keys() -> std::collections::HashSet<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    let text = std::fs::read_to_string(path).expect("docs/configuration.md");
    let mut keys = std::collections::HashSet::new();
    let mut section: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("<!-- settings [") {
            section = rest.strip_suffix("] -->").map(str::to_string);
        } else if line.starts_with("<!-- /settings") {
            section = None;
        } else if let (Some(sec), Some(rest)) = (&section, line.strip_prefix("| `"))
            && let Some(key) = rest.split('`').next()
        {
            keys.insert((sec.clone(), key.to_string()));
        }
    }
    keys
}

/// The `[section] key` and `[[section]] key` references in a text (inside backticks, as the
/// migration guides write them: `` `[cache] default_ttl` ``, `` `[[backend]] max_idle = 32` ``).
fn setting_references(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("`[") {
        let rest = &text[i + 2..];
        let rest = rest.strip_prefix('[').unwrap_or(rest);
        let Some(end) = rest.find(']') else { continue };
        let section = &rest[..end];
        if section.is_empty()
            || !section
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'_' || b == b'2')
        {
            continue;
        }
        let after = rest[end..].trim_start_matches(']');
        let Some(after) = after.strip_prefix(' ') else {
            continue;
        };
        let key: String = after
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !key.is_empty() {
            out.push((section.to_string(), key));
        }
    }
    out
}

#[test]
fn the_reference_reader_reads_references() {
    let refs = setting_references("a `[cache] default_ttl` b `[[backend]] max_idle = 32` `[x]`");
    assert_eq!(
        refs,
        vec![
            ("cache".to_string(), "default_ttl".to_string()),
            ("backend".to_string(), "max_idle".to_string())
        ]
    );
}

/// A guide that names a setting as `[section] key` names one that exists (the migration
/// guides map hundreds of directives to settings; a renamed setting must not leave them
/// pointing at nothing).
#[test]
fn every_setting_the_docs_name_with_its_section_exists() {
    let known = reference_keys();
    assert!(
        known.len() > 150,
        "only {} settings read: the reader broke",
        known.len()
    );
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{doc:?}: {e}"));
        for (section, key) in setting_references(&text) {
            checked += 1;
            if !known.contains(&(section.clone(), key.clone())) {
                let name = doc.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&doc);
                missing.push(format!("{}: `[{section}] {key}`", name.display()));
            }
        }
    }
    assert!(
        checked >= 100,
        "only {checked} references found: the reader broke"
    );
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "settings the docs name that docs/configuration.md does not have:\n{}",
        missing.join("\n")
    );
}

/// Source files of the server with `unsafe` code (test code apart: `tests.rs`, `*_tests.rs`).
fn files_with_unsafe(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_with_unsafe(&path, out);
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".rs") || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern"]
            .iter()
            .any(|u| text.contains(u))
        {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            out.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

/// SECURITY.md's "Unsafe code" table is a promise: every file with an `unsafe` block is named
/// there, by its path or by a directory of it (`src/vtc/`), with what it does and why.
#[test]
fn security_md_names_every_file_with_unsafe_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let security = std::fs::read_to_string(root.join("SECURITY.md")).unwrap();
    let table = &security[security
        .find("## Unsafe code")
        .expect("an Unsafe code section")..];
    let mut files = Vec::new();
    files_with_unsafe(&root.join("src"), &mut files);
    assert!(files.len() > 10, "unsafe code found in {files:?}");
    let unnamed: Vec<_> = files
        .iter()
        .filter(|f| {
            !table.contains(&format!("`{f}`"))
                && !Path::new(f.as_str())
                    .ancestors()
                    .skip(1)
                    .filter(|d| d.components().count() > 1)
                    .any(|d| table.contains(&format!("`{}/`", d.display())))
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "files with unsafe code that SECURITY.md's \"Unsafe code\" table does not name: {unnamed:?}"
    );
}
