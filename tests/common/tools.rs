//! System tools some tests drive (Debian's chromium, slowhttptest): a test without its tool
//! skips with a message on a developer's machine, and fails where `SHELLAC_REQUIRE_TOOLS=1`
//! (set by `.ci/run`, which installs them), so CI cannot go green without running it.

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
