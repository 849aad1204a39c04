//! Statements in the docs that a test can hold to the code (issue 23, defect 16: a dozen
//! sentences had drifted). Every counter or gauge the docs name where they say "counter
//! `x`" or "gauges `x` / `y`" must exist in a running instance's `/stats`.

mod common;

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
