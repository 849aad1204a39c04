//! What a run is asked and what it gives: the runner's options, what the `shellac` binary
//! can do with VCL, and each file's outcome (its verdict, log and `-errvcl` cases).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `shellac` on this build can do with VCL, found by asking it (`shellac check` on a
/// valid and an invalid VCL, directly and as `[vcl] file` of a configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wiring {
    /// `shellac serve` / `shellac check` take a configuration with `[vcl] file`.
    pub serve: bool,
    /// `shellac check FILE.vcl` checks a VCL file.
    pub check: bool,
}

/// How the runner runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `shellac` binary `varnish vN` runs.
    pub shellac: PathBuf,
    /// Each file's time limit; its processes are killed after it.
    pub timeout: Duration,
    /// Files run at once.
    pub jobs: usize,
    /// Keep the log of passing files too.
    pub verbose: bool,
}

/// A file's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(String),
    Skip(String),
    /// Not run: the file sends what Shellac refuses by design, or expects what Shellac never
    /// sends (`scope/refused.rs`). Counted as skipped, and on a line of its own.
    Aside(String),
}

impl Verdict {
    /// The word a results line starts with (a set-aside file is a skip).
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail(_) => "FAIL",
            Verdict::Skip(_) | Verdict::Aside(_) => "SKIP",
        }
    }

    /// Why it failed or was not run (empty for a pass).
    pub fn reason(&self) -> &str {
        match self {
            Verdict::Pass => "",
            Verdict::Fail(r) | Verdict::Skip(r) | Verdict::Aside(r) => r,
        }
    }
}

/// One `-errvcl` (or 2.1's `-badvcl`) a file gave: Varnish must refuse the VCL.
#[derive(Clone, Debug)]
pub struct ErrvclCase {
    pub line: u32,
    /// What Varnish's message contains (`-errvcl MSG`).
    pub expected: Option<String>,
    pub rejected: bool,
    /// Shellac's message contains Varnish's (informative: the words differ).
    pub message_matched: bool,
    pub message: String,
}

/// What running one file gave.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub file: PathBuf,
    pub verdict: Verdict,
    pub duration: Duration,
    /// The file's log (always for failures; for the rest with `verbose`).
    pub log: Vec<String>,
    pub errvcl: Vec<ErrvclCase>,
}

impl Outcome {
    /// `trunk/b00001.vtc`: the folder and file names.
    pub fn name(&self) -> String {
        display_name(&self.file)
    }
}

/// `parent/file` of a path.
pub fn display_name(p: &Path) -> String {
    let file = p
        .file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    match p.parent().and_then(Path::file_name) {
        Some(d) => format!("{}/{file}", d.to_string_lossy()),
        None => file,
    }
}
