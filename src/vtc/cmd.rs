//! `shellac vtc FILE|DIR...`: the command line of the runner — a line per file, the
//! failures' logs, the table with `--summary`, a results file with `--results`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::census::CaseVerdict;
use super::outcome::{Options, Outcome, Verdict};
use super::report;
use super::runner::Runner;

/// `shellac vtc`'s arguments.
pub struct CommandArgs {
    pub paths: Vec<PathBuf>,
    pub summary: bool,
    pub jobs: usize,
    pub timeout: Duration,
    pub verbose: bool,
    pub results: Option<PathBuf>,
    /// Check the files' `-errvcl`/`-badvcl` VCLs instead of running them.
    pub errvcl: bool,
}

/// The .vtc files of `paths` (folders: their `*.vtc`, sorted).
pub fn collect(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|e| e == "vtc"))
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// `shellac vtc`: runs the files, prints a line per file (and the failures' logs), and the
/// table with `--summary`. Exit 1 if a file failed, 2 if the runner could not start.
pub fn command(args: &CommandArgs) -> std::process::ExitCode {
    use std::process::ExitCode;
    let (files, runner) = match start(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("shellac vtc: {e}");
            return ExitCode::from(2);
        }
    };
    let w = runner.wiring();
    eprintln!(
        "shellac vtc: {} files, {} at a time; VCL: serve {}, check {}",
        files.len(),
        args.jobs.max(1),
        if w.serve { "wired" } else { "not wired" },
        if w.check { "wired" } else { "not wired" },
    );
    let t0 = Instant::now();
    if args.errvcl {
        return errvcl(&runner, &files);
    }
    let outcomes = runner.run_all(&files, &print_outcome);
    let table = report::table(&outcomes, 15);
    if args.summary {
        println!(
            "\n== varnishtest against shellac\n{table}total time {:.1}s",
            t0.elapsed().as_secs_f64()
        );
    }
    if let Some(path) = &args.results {
        write_results(path, &outcomes, &table, t0);
    }
    if outcomes
        .iter()
        .any(|o| matches!(o.verdict, Verdict::Fail(_)))
    {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The files to run and a runner for them, or why there are none.
fn start(args: &CommandArgs) -> Result<(Vec<PathBuf>, Runner), String> {
    let files = match collect(&args.paths) {
        Ok(f) if !f.is_empty() => f,
        Ok(_) => return Err(format!("no .vtc files in {:?}", args.paths)),
        Err(e) => return Err(e.to_string()),
    };
    let shellac =
        std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let runner = Runner::new(Options {
        shellac,
        timeout: args.timeout,
        jobs: args.jobs,
        verbose: args.verbose,
    })
    .map_err(|e| format!("temporary directory: {e}"))?;
    Ok((files, runner))
}

/// `--errvcl`: every `-errvcl`/`-badvcl` case checked; exit 1 if Shellac accepted one.
fn errvcl(runner: &Runner, files: &[PathBuf]) -> std::process::ExitCode {
    let cases = runner.errvcl_census(files);
    let (mut refused, mut accepted, mut out) = (0, 0, 0);
    for c in &cases {
        let text = match &c.verdict {
            CaseVerdict::Refused => {
                refused += 1;
                format!("REFUSED  {}: {}", c.name(), c.message)
            }
            CaseVerdict::Accepted => {
                accepted += 1;
                format!(
                    "ACCEPTED {}: Varnish says {:?}",
                    c.name(),
                    c.expected.as_deref().unwrap_or("(-badvcl)")
                )
            }
            CaseVerdict::OutOfScope(why) => {
                out += 1;
                format!("SKIP     {}: {why}", c.name())
            }
        };
        println!("{text}");
    }
    println!(
        "{} cases: {refused} refused, {accepted} accepted, {out} out of scope",
        cases.len()
    );
    if accepted > 0 {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}

/// A file's line (and its log, for a failure or with `--verbose`), as it finishes.
fn print_outcome(o: &Outcome) {
    let word = o.verdict.word();
    let why = match &o.verdict {
        Verdict::Pass => String::new(),
        v => format!(": {}", v.reason()),
    };
    let mut text = format!(
        "{word} {} ({:.1}s){why}\n",
        o.name(),
        o.duration.as_secs_f64()
    );
    for l in &o.log {
        text.push_str("    ");
        text.push_str(l);
        text.push('\n');
    }
    print!("{text}");
}

/// `--results FILE`: the table, then a line per file.
fn write_results(path: &std::path::Path, outcomes: &[Outcome], table: &str, t0: Instant) {
    let mut text = format!(
        "# shellac vtc results ({} files, {:.1}s)\n{table}\n",
        outcomes.len(),
        t0.elapsed().as_secs_f64()
    );
    for o in outcomes {
        let (word, why) = (o.verdict.word(), o.verdict.reason());
        text.push_str(&format!("{word} {} {why}\n", o.name()));
    }
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("shellac vtc: {}: {e}", path.display());
    }
}
