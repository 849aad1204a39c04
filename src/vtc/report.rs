//! The results table: pass / fail / skipped per tree (`trunk`, `2.1.5`) and folder (the
//! file name's first letter: b basic, c complex, d directors, s slow, v VCL, ...), the
//! in-scope pass rate of the goal's folders (b, c, v, d, s), the most common causes of
//! failures and skips, and how the `-errvcl` cases came out.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::outcome::{Outcome, Verdict};

/// The folders the goal counts.
pub const GOAL_FOLDERS: &[&str] = &["b", "c", "v", "d", "s"];

#[derive(Default, Clone, Copy)]
struct Counts {
    pass: usize,
    fail: usize,
    /// Skipped, set-aside files included.
    skip: usize,
    /// Set aside as refused by design (`Verdict::Aside`), of `skip`.
    aside: usize,
}

impl Counts {
    fn add(&mut self, v: &Verdict) {
        match v {
            Verdict::Pass => self.pass += 1,
            Verdict::Fail(_) => self.fail += 1,
            Verdict::Skip(_) => self.skip += 1,
            Verdict::Aside(_) => {
                self.skip += 1;
                self.aside += 1;
            }
        }
    }
    fn run(&self) -> usize {
        self.pass + self.fail
    }
    fn rate(&self) -> String {
        if self.run() == 0 {
            "-".into()
        } else {
            format!("{:.1}%", 100.0 * self.pass as f64 / self.run() as f64)
        }
    }
}

/// `(tree, folder)` of an outcome: `trunk`/`2.1.5` (the parent directory) and the first
/// letter of the file name.
pub fn place(o: &Outcome) -> (String, String) {
    let tree = o
        .file
        .parent()
        .and_then(|p| p.file_name())
        .map_or_else(|| ".".into(), |n| n.to_string_lossy().into_owned());
    let folder = o
        .file
        .file_name()
        .and_then(|n| n.to_string_lossy().chars().next())
        .map_or_else(|| "?".into(), |c| c.to_string());
    (tree, folder)
}

/// The table of `outcomes`, with the top `causes` failure and skip causes.
pub fn table(outcomes: &[Outcome], causes: usize) -> String {
    let mut rows: BTreeMap<(String, String), Counts> = BTreeMap::new();
    for o in outcomes {
        rows.entry(place(o)).or_default().add(&o.verdict);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<7} {:<6} {:>5} {:>5} {:>5} {:>5}  {:>9}",
        "tree", "folder", "files", "pass", "fail", "skip", "pass/run"
    );
    let mut goal = Counts::default();
    let mut all = Counts::default();
    for ((tree, folder), c) in &rows {
        let _ = writeln!(
            out,
            "{tree:<7} {folder:<6} {:>5} {:>5} {:>5} {:>5}  {:>9}",
            c.pass + c.fail + c.skip,
            c.pass,
            c.fail,
            c.skip,
            c.rate()
        );
        for (sum, yes) in [
            (&mut all, true),
            (&mut goal, GOAL_FOLDERS.contains(&folder.as_str())),
        ] {
            if yes {
                sum.pass += c.pass;
                sum.fail += c.fail;
                sum.skip += c.skip;
                sum.aside += c.aside;
            }
        }
    }
    for (label, c) in [("b,c,v,d,s", goal), ("all", all)] {
        let _ = writeln!(
            out,
            "{:<14} {:>5} {:>5} {:>5} {:>5}  {:>9}",
            label,
            c.pass + c.fail + c.skip,
            c.pass,
            c.fail,
            c.skip,
            c.rate()
        );
    }
    if all.aside > 0 {
        let _ = writeln!(
            out,
            "set aside as refused by design: {} (b,c,v,d,s: {}; counted as skipped above; \
             see docs/varnishtest.md)",
            all.aside, goal.aside
        );
    }
    let (cases, rejected, matched) = errvcl(outcomes);
    let _ = writeln!(
        out,
        "-errvcl/-badvcl cases run: {cases}, refused by Shellac: {rejected}, accepted: {} \
         (Varnish's message words found in Shellac's: {matched})",
        cases - rejected
    );
    if causes > 0 {
        for (title, fail) in [("failures", true), ("skips", false)] {
            let top = top_causes(outcomes, fail, causes);
            if top.is_empty() {
                continue;
            }
            let _ = writeln!(out, "top causes of {title}:");
            for (cause, n) in top {
                let _ = writeln!(out, "  {n:>4}  {cause}");
            }
        }
    }
    out
}

/// `(cases, refused, message matched)` over every `-errvcl`/`-badvcl` run.
pub fn errvcl(outcomes: &[Outcome]) -> (usize, usize, usize) {
    let cases = outcomes.iter().flat_map(|o| &o.errvcl);
    let (mut n, mut rejected, mut matched) = (0, 0, 0);
    for c in cases {
        n += 1;
        rejected += usize::from(c.rejected);
        matched += usize::from(c.message_matched);
    }
    (n, rejected, matched)
}

/// The most common causes of failures (`fail`) or skips, their details folded.
pub fn top_causes(outcomes: &[Outcome], fail: bool, n: usize) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for o in outcomes {
        let reason = match (&o.verdict, fail) {
            (Verdict::Fail(r), true) | (Verdict::Skip(r) | Verdict::Aside(r), false) => r,
            _ => continue,
        };
        *counts.entry(fold(reason)).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// A reason with its particulars left out, so that like causes count together.
pub fn fold(reason: &str) -> String {
    let mut r = reason.to_string();
    if let Some(at) = r.find(" (line ")
        && let Some(end) = r[at..].find(')')
    {
        r.replace_range(at..at + end + 1, "");
    }
    // A refusal by design names its RFC section: kept whole.
    if r.starts_with("refused by design") {
        return r;
    }
    // "... (vcl2.vcl:8:3)": where in the VCL.
    if let Some(at) = r.rfind(" (vcl")
        && r.ends_with(')')
    {
        r.truncate(at);
    }
    // EXPECT lhs (value) op "rhs" failed → EXPECT lhs op failed.
    if let Some(rest) = r.strip_prefix("EXPECT ")
        && r.ends_with(" failed")
    {
        let lhs = rest.split_whitespace().next().unwrap_or("");
        let op = rest
            .split_whitespace()
            .find(|w| matches!(*w, "==" | "!=" | "~" | "!~" | "<" | ">" | "<=" | ">="))
            .unwrap_or("");
        return format!("EXPECT {lhs} {op} failed");
    }
    if let Some(rest) = r.strip_prefix("Not true: ") {
        let counter = rest.split_whitespace().next().unwrap_or("");
        return format!("counter {counter} not as expected");
    }
    // Numbers vary (ports, paths, counts); a protocol's version ("HTTP/2") does not.
    let mut out = String::with_capacity(r.len());
    let chars: Vec<char> = r.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let version = start > 0 && chars[start - 1] == '/' && i - start == 1;
            if version {
                out.extend(&chars[start..i]);
            } else {
                out.push('N');
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out.chars().take(110).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding() {
        assert_eq!(
            fold("EXPECT resp.status (503) == \"200\" failed"),
            "EXPECT resp.status == failed"
        );
        assert_eq!(
            fold("Not true: cache_hit (0) == 1 (1)"),
            "counter cache_hit not as expected"
        );
        assert_eq!(fold("logexpect (line 12)"), "logexpect");
        assert_eq!(
            fold("refused by design: a target (RFC 9112 §3.2) (line 43)"),
            "refused by design: a target (RFC 9112 §3.2)"
        );
        assert_eq!(fold("HTTP/2 frames (line 3)"), "HTTP/2 frames");
        assert_eq!(
            fold("Failed to open 127.0.0.1:4242: refused"),
            "Failed to open N.N.N.N:N: refused"
        );
    }
}
