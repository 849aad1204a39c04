//! Varnish's own test suite against Shellac (docs/varnishtest.md).
//!
//! `varnish_test_suite` runs every .vtc of `../shared/varnishtest/{trunk,2.1.5}` with the
//! runner of `src/vtc/` (`shellac vtc`), [`JOBS`] files at a time, prints the pass / fail /
//! skipped table per folder into the test's output (past the capture: CI's log shows it) and
//! writes it with every file's result to `target/tmp/varnishtest-results.txt`. The pass rate
//! is a measure, not a condition; what fails the test:
//! - a file listed in `tests/varnishtest/expected-pass.txt` that does not pass any more
//!   (`SHELLAC_BLESS=1` rewrites the list from this run's passes, leaving out the files of
//!   `tests/varnishtest/flaky.txt`, whose result depends on timing). A listed file that
//!   fails is run once more, alone, and fails the test only if it fails again; one that
//!   passes then is printed with its first log ("passed when run again alone");
//! - once Shellac takes VCL, an in-scope `-errvcl`/`-badvcl` VCL of the goal's folders
//!   (b, c, v, d, s; each checked on its own, whatever else its file needs) that Shellac
//!   accepts, unless it is listed in `tests/varnishtest/errvcl-accepted.txt` (the checker's
//!   known gaps: the goal is an empty list; a listed case Shellac now refuses fails the test
//!   too, so the list only shrinks — `SHELLAC_BLESS=1` rewrites it).
//!
//! `runner_self_test` runs `tests/varnishtest/runner/*.vtc`: files that must pass, fail, be
//! skipped or be set aside as refused by design (`aside-`) by their name, so the runner
//! itself is held to what it reports.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use shellac::vtc::{
    Case, CaseVerdict, Options, Outcome, Runner, Verdict, collect, display_name, report,
};

/// Files of the suite run at once (and `-errvcl` cases checked at once). A file mostly waits
/// (its `delay`s and timeouts, process starts): two at a time, the whole tree took 415 s of
/// wall time for 135 s of CPU (`shellac vtc -j 2`, load ~10); four at a time, 117 s beside three
/// busy loops (load ~14), every expected-pass file passing.
const JOBS: usize = 4;

fn runner(jobs: usize, timeout: Duration) -> Runner {
    Runner::new(Options {
        shellac: PathBuf::from(env!("CARGO_BIN_EXE_shellac")),
        timeout,
        jobs,
        verbose: false,
    })
    .expect("runner")
}

/// Writes past libtest's capture, so the table is in CI's log whether the test passes or not.
fn show(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

fn manifest(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

#[test]
fn runner_self_test() {
    let files = collect(&[manifest("tests/varnishtest/runner")]).expect("fixtures");
    assert!(files.len() >= 8, "{files:?}");
    let r = runner(4, Duration::from_secs(20));
    let mut wrong = Vec::new();
    for o in r.run_all(&files, &|_| {}) {
        let name = o.file.file_name().unwrap().to_string_lossy().to_string();
        let ok = match &o.verdict {
            Verdict::Pass => name.starts_with("pass-"),
            Verdict::Fail(_) => name.starts_with("fail-"),
            Verdict::Skip(_) => name.starts_with("skip-"),
            Verdict::Aside(_) => name.starts_with("aside-"),
        };
        if !ok {
            wrong.push(format!("{name}: {:?}\n{}", o.verdict, o.log.join("\n")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn varnish_test_suite() {
    let data = manifest("../shared/varnishtest");
    if !data.join("trunk").is_dir() {
        assert!(
            std::env::var("SHELLAC_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "{} is missing and SHELLAC_REQUIRE_TOOLS=1",
            data.display()
        );
        show(&format!(
            "skipped: Varnish's test scripts are not at {}\n",
            data.display()
        ));
        return;
    }
    let files = collect(&[data.join("trunk"), data.join("2.1.5")]).expect("test scripts");
    let r = runner(JOBS, Duration::from_secs(30));
    let w = r.wiring();
    let t0 = Instant::now();
    let outcomes = r.run_all(&files, &|_| {});
    let elapsed = t0.elapsed();
    let table = report::table(&outcomes, 15);
    show(&format!(
        "\n== varnishtest (Varnish's own test scripts) against shellac: {} files in {:.1} s, \
         {JOBS} at a time; VCL serve {}, check {}\n{table}",
        outcomes.len(),
        elapsed.as_secs_f64(),
        if w.serve { "wired" } else { "not wired" },
        if w.check { "wired" } else { "not wired" },
    ));
    write_results(&outcomes, &table, elapsed);

    let flaky: Vec<String> = std::fs::read_to_string(manifest("tests/varnishtest/flaky.txt"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    let passing: Vec<String> = outcomes
        .iter()
        .filter(|o| o.verdict == Verdict::Pass && !flaky.contains(&o.name()))
        .map(Outcome::name)
        .collect();
    let list = manifest("tests/varnishtest/expected-pass.txt");
    if std::env::var("SHELLAC_BLESS").as_deref() == Ok("1") {
        let mut text = String::from(
            "# Varnish test scripts that pass against Shellac (tests/varnishtest.rs fails if\n\
             # one stops passing). Rewritten by SHELLAC_BLESS=1 cargo test --test varnishtest.\n",
        );
        for p in &passing {
            text.push_str(p);
            text.push('\n');
        }
        std::fs::write(&list, text).expect("write expected-pass.txt");
        show(&format!(
            "blessed: {} passing files listed\n",
            passing.len()
        ));
    }
    let expected = std::fs::read_to_string(&list).unwrap_or_default();
    let mut regressions = Vec::new();
    let mut failed = Vec::new();
    for name in expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        match outcomes.iter().find(|o| o.name() == name) {
            Some(o) if o.verdict == Verdict::Pass => {}
            Some(o) => failed.push(o),
            None => regressions.push(format!("{name}: not run")),
        }
    }
    // A listed file that failed runs once more, alone: one that passes then failed on
    // timing (a loaded machine: CI builds clippy and the fuzz targets beside the tests) and
    // is printed, with its first log, as such; one that fails again is a regression.
    if !failed.is_empty() {
        let again = runner(1, Duration::from_secs(30)).run_all(
            &failed.iter().map(|o| o.file.clone()).collect::<Vec<_>>(),
            &|_| {},
        );
        for first in failed {
            let name = first.name();
            match again.iter().find(|o| o.name() == name) {
                Some(o) if o.verdict == Verdict::Pass => show(&format!(
                    "passed when run again alone (failed first, on timing?): {name}: {:?}\n{}\n",
                    first.verdict,
                    first.log.join("\n")
                )),
                Some(o) => regressions.push(format!(
                    "{name}: {:?}, and run again alone: {:?}\n{}",
                    first.verdict,
                    o.verdict,
                    o.log.join("\n")
                )),
                None => regressions.push(format!("{name}: not run again")),
            }
        }
    }
    // Every -errvcl/-badvcl of the goal's folders, each checked on its own (files skipped for
    // something else included).
    let goal: Vec<PathBuf> = files
        .iter()
        .filter(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.get(..1))
                .is_some_and(|c| report::GOAL_FOLDERS.contains(&c))
        })
        .cloned()
        .collect();
    let census = r.errvcl_census(&goal);
    let count = |v: fn(&CaseVerdict) -> bool| census.iter().filter(|c| v(&c.verdict)).count();
    let accepted: Vec<String> = census
        .iter()
        .filter(|c| c.verdict == CaseVerdict::Accepted)
        .map(Case::name)
        .collect();
    let rejected: Vec<String> = census
        .iter()
        .filter(|c| c.verdict == CaseVerdict::Refused)
        .map(Case::name)
        .collect();
    show(&format!(
        "-errvcl/-badvcl of b,c,v,d,s checked one by one: {} cases, {} in scope: {} refused \
         ({} naming what Varnish's message names), {} accepted; {} out of scope\n",
        census.len(),
        rejected.len() + accepted.len(),
        rejected.len(),
        census.iter().filter(|c| c.same_reason).count(),
        accepted.len(),
        count(|v| matches!(v, CaseVerdict::OutOfScope(_)))
    ));
    let gaps = manifest("tests/varnishtest/errvcl-accepted.txt");
    if std::env::var("SHELLAC_BLESS").as_deref() == Ok("1") {
        let mut text = String::from(
            "# -errvcl/-badvcl VCLs of in-scope files that Shellac accepts though Varnish refuses\n\
             # them (FILE:LINE): the checker's known gaps, to be emptied. tests/varnishtest.rs\n\
             # fails on an accepted case not listed here, and on a listed one now refused.\n",
        );
        for a in &accepted {
            text.push_str(a);
            text.push('\n');
        }
        std::fs::write(&gaps, text).expect("write errvcl-accepted.txt");
    }
    let known: Vec<String> = std::fs::read_to_string(&gaps)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    if !accepted.is_empty() {
        show(&format!(
            "-errvcl/-badvcl VCLs accepted by Shellac (goal: none): {}\n",
            accepted.join(", ")
        ));
    }
    assert!(
        regressions.is_empty(),
        "{} file(s) of tests/varnishtest/expected-pass.txt no longer pass:\n{}",
        regressions.len(),
        regressions.join("\n\n")
    );
    if w.serve || w.check {
        let new: Vec<&String> = accepted.iter().filter(|a| !known.contains(a)).collect();
        assert!(
            new.is_empty(),
            "{} in-scope -errvcl/-badvcl VCL(s) accepted by Shellac though Varnish refuses them \
             (and not in tests/varnishtest/errvcl-accepted.txt): {new:?}",
            new.len()
        );
        let fixed: Vec<&String> = known.iter().filter(|k| rejected.contains(k)).collect();
        assert!(
            fixed.is_empty(),
            "now refused, remove from tests/varnishtest/errvcl-accepted.txt \
             (SHELLAC_BLESS=1): {fixed:?}"
        );
    }
}

fn write_results(outcomes: &[Outcome], table: &str, elapsed: Duration) {
    let mut text = format!(
        "# cargo test --test varnishtest: {} files, {:.1} s\n{table}\n",
        outcomes.len(),
        elapsed.as_secs_f64()
    );
    for o in outcomes {
        let (word, why) = (o.verdict.word(), o.verdict.reason());
        text.push_str(&format!(
            "{word} {} ({:.1}s) {why}\n",
            display_name(&o.file),
            o.duration.as_secs_f64()
        ));
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("varnishtest-results.txt");
    if let Err(e) = std::fs::write(&path, text) {
        show(&format!("cannot write {}: {e}\n", path.display()));
    } else {
        show(&format!("results: {}\n", path.display()));
    }
}
