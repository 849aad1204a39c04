//! System tools some tests drive (Debian's chromium, slowhttptest): a test without its tool
//! skips with a message on a developer's machine, and fails where `SHELLAC_REQUIRE_TOOLS=1`
//! (set by `.ci/run`, which installs them), so CI cannot go green without running it. [`which`]
//! and [`python_with_h2`] find them.

/// The environment variable that turns a missing tool from a skip into a failure.
pub const REQUIRE_TOOLS: &str = "SHELLAC_REQUIRE_TOOLS";

/// Whether missing tools fail the tests that need them.
pub fn tools_required() -> bool {
    std::env::var(REQUIRE_TOOLS).is_ok_and(|v| v == "1")
}

/// `Some(found)` when the tool is there. When it is not: panics if [`tools_required`], else
/// prints that the test was skipped (naming the Debian package) and returns `None`.
pub fn require<T>(found: Option<T>, tool: &str, package: &str) -> Option<T> {
    if found.is_some() {
        return found;
    }
    assert!(
        !tools_required(),
        "{tool} is not installed and {REQUIRE_TOOLS}=1: this test must run \
         (apt-get install {package}; .ci/run installs it)"
    );
    eprintln!("skipped: {tool} is not installed (apt-get install {package})");
    None
}

/// The path of `tool` in a directory of `$PATH`, if it is there.
pub fn which(tool: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// A Python 3 that has the `h2` package (Debian's python3-h2 is for /usr/bin/python3).
pub async fn python_with_h2() -> Option<std::path::PathBuf> {
    for candidate in ["/usr/bin/python3", "python3"] {
        let ok = tokio::process::Command::new(candidate)
            .args(["-c", "import h2, hpack"])
            .output()
            .await
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(std::path::PathBuf::from(candidate));
        }
    }
    None
}
