//! The `shellac` command line: logging set up, then the command run (`cli/`).

/// Prints a line to stdout, ignoring a closed pipe (`shellac check x | head -1` must not panic).
macro_rules! say {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::args::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(log_filter())
        .with_writer(std::io::stderr)
        // Colour only a terminal: escape codes in a log file or journald are noise.
        // `NO_COLOR` (no-color.org) turns it off there too.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
    cli::run(cli.command)
}

/// `$SHELLAC_LOG` (default `info`). The Redis client's own warnings (one line per node per
/// failed attempt, several a second) are left out unless `$SHELLAC_LOG` names `redis`: the
/// shared tier logs what they mean once (cache/shared/remote.rs, auth.rs).
fn log_filter() -> tracing_subscriber::EnvFilter {
    let spec = std::env::var("SHELLAC_LOG").unwrap_or_else(|_| "info".into());
    let spec = if spec.contains("redis") {
        spec
    } else {
        format!("{spec},redis=error")
    };
    tracing_subscriber::EnvFilter::try_new(&spec).unwrap_or_else(|_| "info,redis=error".into())
}
