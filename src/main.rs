//! The `shellac` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{CommandFactory, Parser, Subcommand};

use shellac::client::AdminClient;
use shellac::config::{CliOverrides, Config, ConfigError, units};
use shellac::reload::ConfigSource;
use shellac::{console, demo, server};

/// Shellac: a caching HTTP reverse proxy (web accelerator).
#[derive(Parser)]
#[command(name = "shellac", version, about, long_about = None, after_help = "Quick start:\n  shellac demo                       built-in origin + cache, shows a miss then a hit\n  shellac serve --backend 127.0.0.1:8080\n  shellac check /etc/shellac/shellac.toml\n  shellac stat | top | log           watch a running instance\n  shellac inspect http://HOST/path   what is cached for a URL (tiers, TTL left, size, tags)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy (on the embedded default config unless --config is given).
    Serve {
        /// Configuration file (TOML). Without it the embedded default is used:
        /// listen 127.0.0.1:6081, backend 127.0.0.1:8080, admin 127.0.0.1:6082, 256 MiB cache.
        #[arg(short, long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Listen address; repeat for several. Replaces the config's `server.listen`.
        #[arg(short = 'a', long, value_name = "ADDR:PORT")]
        listen: Vec<SocketAddr>,
        /// Origin server; replaces the first backend's host and port.
        #[arg(short, long, value_name = "HOST:PORT")]
        backend: Option<String>,
        /// Admin listener address (counters, /metrics, cache inspection, purge, reload,
        /// dashboard; every route in docs/admin.md).
        #[arg(long, value_name = "ADDR:PORT")]
        admin: Option<SocketAddr>,
        /// Memory cache size, e.g. 512MiB or 2GiB.
        #[arg(short = 's', long, value_name = "SIZE", value_parser = parse_size)]
        cache_size: Option<u64>,
        /// A Varnish VCL file (2.x, 3.0, 4.x) as the policy: its backends, probes and
        /// directors replace the config's (docs/vcl.md). Compiled again on every reload.
        #[arg(long, value_name = "FILE")]
        vcl: Option<PathBuf>,
    },
    /// Start a built-in origin and the proxy in front of it, and show a miss then a hit.
    Demo {
        /// Where the proxy listens.
        #[arg(
            short = 'a',
            long,
            value_name = "ADDR:PORT",
            default_value = "127.0.0.1:6081"
        )]
        listen: SocketAddr,
        /// Admin listener address.
        #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:6082")]
        admin: SocketAddr,
    },
    /// Validate a configuration file, then check it against this machine as `serve` would
    /// (addresses, access log and disk tier paths, free space): exit 0 with a summary, or 1
    /// with every error found. Warnings (a port held by the running Shellac this file is for, ...) do not fail it; a port another process holds does. A `.vcl`
    /// file is compiled and every error reported with file:line:column.
    Check {
        /// Configuration file (TOML), or a VCL file (`.vcl`).
        #[arg(value_name = "FILE", required_unless_present = "config")]
        file: Option<PathBuf>,
        /// The same file, written as `serve` takes it (`shellac check -c FILE`).
        #[arg(short, long, value_name = "FILE", conflicts_with = "file")]
        config: Option<PathBuf>,
        /// Check the file alone, not this machine (a file meant for another machine).
        #[arg(long)]
        file_only: bool,
        /// Also send every backend its probe's request (or `HEAD /`), connect to the Redis
        /// cluster (`[storage.shared]`, with the file's credentials and TLS) and every ACME
        /// directory, and report what could not be reached, refused or answered wrong.
        #[arg(long, conflicts_with = "file_only")]
        online: bool,
    },
    /// Print the counters of a running Shellac once (GET /stats on its admin listener).
    Stats {
        #[command(flatten)]
        admin: AdminArgs,
        /// Show counters that are zero too (by default they are counted on the last line).
        #[arg(short, long)]
        all: bool,
    },
    /// Live counters of a running Shellac, refreshed every second (like varnishstat): value,
    /// change per second, average per second, hit ratios over 10/100/1000 s, TTFB percentiles.
    Stat {
        #[command(flatten)]
        admin: AdminArgs,
        /// Print once and exit (for scripts).
        #[arg(short = '1', long = "once")]
        once: bool,
        /// Show counters that are still zero too.
        #[arg(short, long)]
        all: bool,
        /// Only this `[[site]]`'s counters (without it, every site's are listed after the
        /// global ones).
        #[arg(long, value_name = "NAME")]
        site: Option<String>,
    },
    /// Live ranking of URLs, hosts, backends or user agents over a sliding window (like
    /// varnishtop).
    Top {
        #[command(flatten)]
        admin: AdminArgs,
        /// Print once and exit.
        #[arg(short = '1', long = "once")]
        once: bool,
        /// What to rank: url, host, backend, ua, site.
        #[arg(long, default_value = "url")]
        by: String,
        /// Only the requests this `[[site]]` answered.
        #[arg(long, value_name = "NAME")]
        site: Option<String>,
        /// Ranking order: requests, misses, bytes.
        #[arg(long, default_value = "requests")]
        sort: String,
        /// Window in seconds (at most 60).
        #[arg(long, default_value_t = 60)]
        window: u64,
        /// Rows shown.
        #[arg(short = 'n', long, default_value_t = 20)]
        rows: usize,
    },
    /// Live stream of transactions: method, URL, status, cache decision and reason, backend,
    /// timings (like varnishlog / varnishncsa). Filters combine.
    Log {
        #[command(flatten)]
        admin: AdminArgs,
        /// Only URLs matching this regular expression.
        #[arg(long, value_name = "REGEX")]
        url: Option<String>,
        /// Only this status or class, e.g. 503 or 5xx.
        #[arg(long, value_name = "CODE|Nxx")]
        status: Option<String>,
        /// Only responses not served from the cache (miss, pass, synth).
        #[arg(long)]
        miss: bool,
        /// Only transactions sent to this backend.
        #[arg(long, value_name = "NAME")]
        backend: Option<String>,
        /// Only the requests this `[[site]]` answered.
        #[arg(long, value_name = "NAME")]
        site: Option<String>,
        /// Only reasons starting with this: `refused` (every request refused by the strict
        /// parser or at max_connections), `refused:bad-host`, `no-store`, `hit-for-miss`, ...
        #[arg(long, value_name = "WORD")]
        reason: Option<String>,
        /// Print the JSON objects as received.
        #[arg(long)]
        json: bool,
    },
    /// Make a running Shellac re-read its configuration file (same as SIGHUP). Prints what
    /// changed, or every error (the running configuration is then kept) and exits 1.
    Reload {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Set a backend's health by hand, as Varnish's `backend.set_health`: `sick` takes it out
    /// of rotation (maintenance), `healthy` puts it in whatever its probe says, `auto` gives
    /// it back to probes (POST /backends/NAME/health). NAME may hold `*`.
    /// Example: `shellac backend web1 sick`
    Backend {
        /// The backend's name (`GET /backends` lists them); `*` matches any run of characters.
        name: String,
        /// sick, healthy or auto.
        #[arg(value_parser = ["sick", "healthy", "auto"])]
        health: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Replace the running Shellac with the binary now at its path, without closing a
    /// listening socket (POST /upgrade): the new process takes the sockets and the disk tier,
    /// the old one drains and exits. Exits 1, the old process serving on, when the new binary
    /// fails to start.
    Upgrade {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Ban cached objects by expression, e.g. `shellac ban 'req.url ~ ^/news/'`.
    /// Fields: req.url, req.http.host, req.http.NAME (the looking-up request), obj.status,
    /// obj.http.NAME; operators ~ !~ == !=; join
    /// conditions with &&. Applies to everything cached before now.
    Ban {
        /// The ban expression.
        expr: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Show what is cached for a URL: every variant, the tiers holding it (memory, disk),
    /// status, size, age, TTL / grace / keep / stale-if-error left, tags, ETag and
    /// Last-Modified (GET /cache on the admin listener). An inspection is not a hit: nothing is
    /// promoted or counted. Exits 1 when nothing is cached.
    /// Examples: `shellac inspect http://www.example.com/news/` ;
    /// `shellac inspect /news/ --host www.example.com --json`
    Inspect {
        /// Absolute URL (http://HOST/path?query), or a path with --host.
        url: String,
        /// Host the URL is requested with (required for a path; overrides the URL's host).
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Print the JSON answer as received.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Purge a URL (every variant) or surrogate keys.
    /// Examples: `shellac purge http://www.example.com/news/` ; `shellac purge --tag product-42`
    Purge {
        /// Absolute URL to purge.
        #[arg(required_unless_present = "tag")]
        url: Option<String>,
        /// Mark stale instead of removing (served within grace while refreshed).
        #[arg(long)]
        soft: bool,
        /// Purge every object carrying this surrogate key (repeatable).
        #[arg(long, conflicts_with = "url")]
        tag: Vec<String>,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Run Varnish's own test scripts (.vtc, varnishtest) against this Shellac: each
    /// `varnish vN` is a `shellac serve` process; a file needing what Shellac or the runner
    /// does not have is skipped with its reason (docs/varnishtest.md). Exit 1 if one failed.
    Vtc {
        /// .vtc files, or folders of them.
        #[arg(required = true, value_name = "FILE|DIR")]
        paths: Vec<PathBuf>,
        /// Print the table (pass / fail / skipped per folder, top causes) at the end.
        #[arg(long)]
        summary: bool,
        /// Files run at once.
        #[arg(short, long, default_value_t = 2)]
        jobs: usize,
        /// Time limit per file, in seconds (its processes are killed after it).
        #[arg(long, default_value_t = 30, value_name = "SECONDS")]
        timeout: u64,
        /// Print every file's log, not only the failures'.
        #[arg(short, long)]
        verbose: bool,
        /// Also write the table (with every file's result) to this file.
        #[arg(long, value_name = "FILE")]
        results: Option<PathBuf>,
        /// Instead of running the files, check each of their -errvcl/-badvcl VCLs on its own
        /// (refused, accepted or out of scope).
        #[arg(long)]
        errvcl: bool,
    },
    /// Write the manual pages, shell completions and installed configuration file into a
    /// folder (packaging/build-deb.sh runs it with the binary it packages).
    #[command(hide = true)]
    Dist {
        /// Output folder (created).
        out: PathBuf,
    },
}

/// How to reach a running Shellac's admin listener.
#[derive(clap::Args, Clone)]
struct AdminArgs {
    /// Admin listener address. Default: the `server.admin` of --config FILE, else
    /// $SHELLAC_ADMIN, else 127.0.0.1:6082.
    #[arg(long, value_name = "ADDR:PORT")]
    admin: Option<SocketAddr>,
    /// The configuration file the running Shellac was started with: its `server.admin` (and
    /// `server.admin_token`) say where to connect.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Bearer token, if `server.admin_token` is set.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "SHELLAC_ADMIN_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

/// Where the admin address came from (`client::locate`), for the error that says how to point
/// the command elsewhere.
static ADMIN_FROM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

impl AdminArgs {
    /// The client for the admin listener this command talks to; exits 2 when the address
    /// given cannot be used.
    fn client(&self) -> AdminClient {
        let env = std::env::var("SHELLAC_ADMIN").ok();
        match shellac::client::locate(
            self.admin,
            self.config.as_deref(),
            env.as_deref(),
            self.token.clone(),
        ) {
            Ok((client, from)) => {
                let _ = ADMIN_FROM.set(from);
                client
            }
            Err(e) => {
                eprintln!("shellac: {e}");
                std::process::exit(2);
            }
        }
    }
}

/// The hint for an admin listener that cannot be reached, if `e` says so.
fn unreachable_hint(e: &anyhow::Error) -> Option<String> {
    let io = e.chain().find_map(|c| c.downcast_ref::<std::io::Error>())?;
    let from = ADMIN_FROM.get()?;
    shellac::client::is_unreachable(io).then(|| shellac::client::unreachable_hint(from))
}

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

fn parse_size(s: &str) -> Result<u64, String> {
    units::parse_size(s)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    let result = match cli.command {
        Command::Check {
            file,
            config,
            file_only,
            online,
        } => {
            // clap requires one of the two.
            let file = file.or(config).unwrap_or_default();
            return check(&file, file_only, online);
        }
        Command::Dist { out } => shellac::dist::write_all(Cli::command(), &out)
            .map(|written| say!("{} files written under {}", written.len(), out.display()))
            .map_err(anyhow::Error::from),
        Command::Vtc {
            paths,
            summary,
            jobs,
            timeout,
            verbose,
            results,
            errvcl,
        } => {
            return shellac::vtc::command(&shellac::vtc::CommandArgs {
                paths,
                summary,
                jobs,
                timeout: Duration::from_secs(timeout),
                verbose,
                results,
                errvcl,
            });
        }
        Command::Serve {
            config,
            listen,
            backend,
            admin,
            cache_size,
            vcl,
        } => serve(config, listen, backend, admin, cache_size, vcl),
        Command::Demo { listen, admin } => run_demo(listen, admin),
        Command::Stats { admin, all } => stats(&admin.client(), all),
        Command::Reload { admin } => return reload(&admin.client()),
        Command::Upgrade { admin } => upgrade(&admin.client()),
        Command::Stat {
            admin,
            once,
            all,
            site,
        } => {
            console::stat(&admin.client(), once, all, site.as_deref()).map_err(anyhow::Error::from)
        }
        Command::Top {
            admin,
            once,
            by,
            sort,
            window,
            rows,
            site,
        } => {
            let mut query = format!(
                "by={}&sort={}&window={window}&n={rows}",
                console::encode(&by),
                console::encode(&sort)
            );
            if let Some(s) = &site {
                query.push_str(&format!("&site={}", console::encode(s)));
            }
            console::top(&admin.client(), &query, once, Duration::from_secs(2))
                .map_err(anyhow::Error::from)
        }
        Command::Log {
            admin,
            url,
            status,
            miss,
            backend,
            site,
            reason,
            json,
        } => {
            if let Some(re) = &url
                && let Err(e) = regex::Regex::new(re)
            {
                eprintln!("shellac: --url: {e}");
                return ExitCode::from(2);
            }
            let mut query = Vec::new();
            if let Some(u) = &url {
                query.push(format!("url={}", console::encode(u)));
            }
            if let Some(s) = &status {
                query.push(format!("status={}", console::encode(s)));
            }
            if miss {
                query.push("miss=1".into());
            }
            if let Some(b) = &backend {
                query.push(format!("backend={}", console::encode(b)));
            }
            if let Some(r) = &reason {
                query.push(format!("reason={}", console::encode(r)));
            }
            if let Some(s) = &site {
                query.push(format!("site={}", console::encode(s)));
            }
            console::log(&admin.client(), &query.join("&"), json).map_err(anyhow::Error::from)
        }
        Command::Inspect {
            url,
            host,
            json,
            admin,
        } => match console::inspect(&admin.client(), &url, host.as_deref(), json) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e.into()),
        },
        Command::Ban { expr, admin } => admin_post(&admin.client(), "/ban", &expr),
        Command::Backend {
            name,
            health,
            admin,
        } => admin_post(
            &admin.client(),
            &format!("/backends/{name}/health"),
            &health,
        ),
        Command::Purge {
            url,
            soft,
            tag,
            admin,
        } => match url {
            Some(url) => admin_post(
                &admin.client(),
                if soft { "/purge?soft=1" } else { "/purge" },
                &url,
            ),
            None => admin_post(&admin.client(), "/purge/tags", &tag.join(" ")),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`shellac stat -1 | head -2`): not an error of ours.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shellac: {e:#}");
            if let Some(hint) = unreachable_hint(&e) {
                eprintln!("shellac: {hint}");
            }
            ExitCode::FAILURE
        }
    }
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

/// Whether `e` is (or was caused by) writing to a pipe whose reader has closed.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn print_errors(errors: &[ConfigError]) {
    for e in errors {
        eprintln!("error: {e}");
    }
}

/// `shellac check`: the file, then (unless `file_only`) what the machine says about it (the
/// same checks `serve` runs before it starts), every error in one run.
fn check(file: &std::path::Path, file_only: bool, online: bool) -> ExitCode {
    if file.extension().is_some_and(|e| e == "vcl") {
        return check_vcl(file);
    }
    let name = file.display().to_string();
    let mut policy = None;
    let (config, mut errors, mut warnings) = match std::fs::read_to_string(file) {
        Ok(text) => {
            let (mut config, mut errors) = Config::read(&text, &name);
            // `[vcl] file`: compiled, every error in it reported too.
            if let Some(c) = config.as_mut() {
                c.relative_to(file.parent().unwrap_or(std::path::Path::new(".")));
                match shellac::vcl::attach::attach(c, None) {
                    Ok(program) => {
                        policy = c
                            .vcl
                            .file
                            .as_deref()
                            .zip(program.global)
                            .map(|(f, p)| shellac::vcl::attach::describe(f, &p));
                    }
                    Err(vcl) => {
                        errors.extend(vcl);
                        config = None;
                    }
                }
            }
            // A file read as written is checked against the machine even when checks across
            // its settings failed: everything `serve` would refuse, in one run.
            let mut warnings = Vec::new();
            if let Some(config) = &config
                && !file_only
            {
                let (machine, warned) = shellac::preflight::check_machine(config, &text, &name);
                errors.extend(machine);
                warnings = warned;
            }
            (config, errors, warnings)
        }
        Err(e) => (
            None,
            vec![ConfigError {
                file: name.clone(),
                line: 0,
                column: 0,
                key: String::new(),
                message: format!("cannot read config file: {e}"),
            }],
            Vec::new(),
        ),
    };
    errors.sort_by_key(|e| (e.line, e.column));
    warnings.sort_by_key(|e| (e.line, e.column));
    if online && let Some(config) = &config {
        errors.extend(check_online(config, &name));
    }
    print_errors(&errors);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    match config {
        Some(config) if errors.is_empty() => {
            say!("{}: OK", file.display());
            say!("  {}", config.summary(policy.as_deref()));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "{}: {} error{}",
                file.display(),
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            );
            ExitCode::FAILURE
        }
    }
}

/// One `--online` probe under way: Ok with what passed, in words ("" when nothing to add).
type Probe = tokio::task::JoinHandle<Result<String, String>>;

/// `shellac check --online`: asks every backend what its probe asks (or `HEAD /`), as its
/// origin kind asks it (TLS, HTTP/2, FastCGI, a document root), connects to the Redis cluster
/// and every ACME directory, all at once (each within its own deadline), prints what answered
/// and returns an error for each that could not be reached, refused or answered wrong.
fn check_online(config: &Config, file: &str) -> Vec<ConfigError> {
    let error = |key: String, message: String| ConfigError {
        file: file.to_string(),
        line: 0,
        column: 0,
        key,
        message,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return vec![error(String::new(), format!("--online: {e}"))],
    };
    runtime.block_on(async {
        let mut probes: Vec<(String, String, Probe)> = Vec::new();
        let counters = std::sync::Arc::new(shellac::stats::Counters::default());
        for (i, b) in config.backends.iter().enumerate() {
            let backend = shellac::backend::Backend::new(b.clone(), config, counters.clone());
            probes.push((
                format!("backend.{i}"),
                format!("backend `{}` ({})", b.name, backend.address()),
                tokio::spawn(async move { shellac::backend::probe::check(&backend).await }),
            ));
        }
        if let Some(s) = &config.storage.shared {
            let options = shellac::cache::shared::remote::Options {
                nodes: s.nodes.clone(),
                username: s.username.clone(),
                password: s.password.clone(),
                tls: s.tls.clone(),
                connect_timeout: s.connect_timeout.0,
                response_timeout: s.write_timeout.0,
            };
            probes.push((
                "storage.shared".into(),
                format!("the Redis cluster ({})", s.nodes.join(", ")),
                tokio::spawn(async move {
                    shellac::cache::shared::remote::probe(&options)
                        .await
                        .map(|()| String::new())
                }),
            ));
        }
        for (i, t) in config.tls.iter().enumerate() {
            for (j, a) in t.acme.iter().enumerate() {
                let (directory, ca_root) = (a.directory.clone(), a.ca_root.clone());
                probes.push((
                    format!("tls.{i}.acme.{j}.directory"),
                    format!("the ACME directory {directory}"),
                    tokio::spawn(async move {
                        shellac::acme::reach_directory(&directory, ca_root.as_deref())
                            .await
                            .map(|()| String::new())
                    }),
                ));
            }
        }
        let mut errors = Vec::new();
        for (key, what, probe) in probes {
            match probe.await {
                Ok(Ok(detail)) if detail.is_empty() => say!("online: {what}: OK"),
                Ok(Ok(detail)) => say!("online: {what}: OK ({detail})"),
                Ok(Err(e)) => errors.push(error(key, format!("{what}: {e}"))),
                Err(e) => errors.push(error(key, format!("{what}: {e}"))),
            }
        }
        errors
    })
}

/// `shellac check site.vcl`: every error of a VCL file (and its includes), or a summary.
fn check_vcl(file: &std::path::Path) -> ExitCode {
    match shellac::vcl::compile_file(file) {
        Ok(p) => {
            say!("{}: OK", file.display());
            let o = &p.origins;
            let backends: Vec<String> = o
                .backends
                .iter()
                .map(|b| format!("{} → {}:{}", b.name, b.host, b.port))
                .collect();
            let directors: Vec<String> = o
                .directors
                .iter()
                .map(|d| {
                    format!(
                        "{} ({}: {})",
                        d.name,
                        d.kind.as_str(),
                        d.backends.join(", ")
                    )
                })
                .collect();
            let subs: Vec<&str> = p.defined.iter().map(|m| m.sub_name()).collect();
            say!(
                "  VCL {}; backends: {}; directors: {}; probes: {}; ACLs: {}; subroutines: {}",
                p.dialect.as_str(),
                if backends.is_empty() {
                    "none".to_string()
                } else {
                    backends.join(", ")
                },
                if directors.is_empty() {
                    "none".to_string()
                } else {
                    directors.join(", ")
                },
                o.probes.len(),
                p.acls.len(),
                subs.join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in &errors {
                let e = shellac::vcl::attach::error(e.clone());
                eprintln!("error: {e}");
            }
            eprintln!(
                "{}: {} error{}",
                file.display(),
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            );
            ExitCode::FAILURE
        }
    }
}

fn parse_backend(spec: &str) -> anyhow::Result<(String, u16)> {
    let (host, port) = spec
        .rsplit_once(':')
        .with_context(|| format!("--backend `{spec}`: expected HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .with_context(|| format!("--backend `{spec}`: bad port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        bail!("--backend `{spec}`: empty host");
    }
    Ok((host.to_string(), port))
}

/// Stack of each runtime thread (workers and blocking threads).
const WORKER_STACK: usize = 8 << 20;

fn runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        // The main thread's size, not tokio's 2 MiB: a reload compiles VCL on a worker and
        // requests run it there, and a VCL nested to the parser's 200-level limit needs more
        // than 2 MiB in a debug build (tests/reload_deep_vcl.rs). Untouched pages cost nothing.
        .thread_stack_size(WORKER_STACK)
        // Access-log records wait in a per-worker batch while the worker is busy.
        .on_thread_park(shellac::txlog::worker_parks)
        .enable_all()
        .build()?)
}

fn serve(
    file: Option<PathBuf>,
    listen: Vec<SocketAddr>,
    backend: Option<String>,
    admin: Option<SocketAddr>,
    cache_size: Option<u64>,
    vcl: Option<PathBuf>,
) -> anyhow::Result<()> {
    // A cold start pages the binary in fault by fault: ask for all of it at once first.
    shellac::service::warm::read_ahead_own_binary();
    // Before any thread exists (both read and clear environment variables): how this process
    // was started (for `shellac upgrade`), the channel from the process it replaces, the
    // sockets systemd passed.
    shellac::upgrade::record_invocation();
    let handover =
        shellac::service::handover::Channel::from_env().context("started by `shellac upgrade`")?;
    let activated =
        shellac::service::listeners::adopt_systemd().map_err(|e| anyhow::anyhow!("{e}"))?;
    if activated > 0 {
        tracing::info!("socket activation: {activated} listening sockets from systemd");
    }
    let (mut config, text) = match &file {
        Some(path) => Config::load_text(path).map_err(|e| {
            print_errors(&e);
            anyhow::anyhow!("invalid configuration")
        })?,
        None => (
            Config::embedded_default(),
            shellac::config::DEFAULT_CONFIG.to_string(),
        ),
    };
    let overrides = CliOverrides {
        listen,
        backend: backend.as_deref().map(parse_backend).transpose()?,
        admin,
        cache_size,
        vcl,
    };
    let program = shellac::vcl::attach::attach(&mut config, overrides.vcl.as_deref())
        .and_then(|program| config.apply(&overrides).map(|()| program))
        .map_err(|e| {
            print_errors(&e);
            anyhow::anyhow!(
                "invalid command-line overrides or VCL ({} error{})",
                e.len(),
                if e.len() == 1 { "" } else { "s" }
            )
        })?;
    // What `shellac check` says about the machine, before anything starts.
    let name = file.as_ref().map_or_else(
        || "<embedded default>".to_string(),
        |p| p.display().to_string(),
    );
    let (errors, warnings) = shellac::preflight::check_machine(&config, &text, &name);
    for w in &warnings {
        tracing::warn!("{w}");
    }
    if !errors.is_empty() {
        print_errors(&errors);
        bail!(
            "cannot start: {} error{} (`shellac check` reports the same)",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        );
    }
    let source = match &file {
        Some(path) => ConfigSource::File(path.clone()),
        None => ConfigSource::Embedded,
    };
    // Replacing a running Shellac: its sockets, then its disk tier once it closed it.
    if let Some(channel) = &handover {
        let count = shellac::upgrade::receive(channel).map_err(|e| anyhow::anyhow!("{e}"))?;
        tracing::info!("upgrade: {count} listening sockets received, disk tier released");
    }
    let rt = runtime(config.server.worker_threads())?;
    rt.block_on(async move {
        let stop = StopSignals::register();
        let config = Arc::new(config);
        let running = server::start_with(config.clone(), program, source, overrides).await?;
        for addr in &running.listen {
            tracing::info!("proxy listening on {addr}");
        }
        if let Some(addr) = running.admin {
            tracing::info!("admin listening on {addr}");
        }
        for (name, addr) in running.live.listening_tls() {
            tracing::info!("TLS listening on {addr} ({name})");
        }
        tracing::info!(
            config = %file.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "<embedded default>".into()),
            "shellac {} serving: {}",
            env!("CARGO_PKG_VERSION"),
            running.live.summary()
        );
        // Every listener is bound and the storage open: tell systemd (Type=notify).
        let status = format!("serving: {}", running.live.summary());
        match &handover {
            Some(channel) => shellac::upgrade::serving(channel, &status),
            None => {
                shellac::service::notify::ready(&status);
            }
        }
        let (quit, quit_rx) = tokio::sync::watch::channel(false);
        let live = running.live.clone();
        tokio::spawn(shellac::service::run(move || live.load().stats(), quit_rx));
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let live = running.live.clone();
            if let Ok(mut usr1) = signal(SignalKind::user_defined1()) {
                tokio::spawn(async move {
                    while usr1.recv().await.is_some() {
                        tracing::info!("SIGUSR1: reopening the access log");
                        live.load().shared.recorder.reopen();
                    }
                });
            }
            let live = running.live.clone();
            if let Ok(mut usr2) = signal(SignalKind::user_defined2()) {
                tokio::spawn(async move {
                    while usr2.recv().await.is_some() {
                        tracing::info!("SIGUSR2: upgrading to the binary at this process's path");
                        if let Err(e) = shellac::upgrade::perform(live.clone()).await {
                            tracing::error!("upgrade failed, this process serves on: {e}");
                        }
                    }
                });
            }
            let live = running.live.clone();
            if let Ok(mut hup) = signal(SignalKind::hangup()) {
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        tracing::info!("SIGHUP: reloading the configuration");
                        if let Err(errors) = live.reload().await {
                            tracing::error!("reload rejected, the running configuration is unchanged:");
                            for e in errors {
                                tracing::error!("  {e}");
                            }
                        }
                    }
                });
            }
        }
        let upgraded = tokio::select! {
            _ = stop.wait() => false,
            _ = shellac::upgrade::finished() => true,
        };
        if upgraded {
            // The answer to `POST /upgrade` goes out before this process stops.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let _ = quit.send(true);
        // The configuration in force now: a reload may have changed the grace.
        let grace = running.live.load().config.server.shutdown_grace.0;
        shellac::service::notify::stopping("shutting down: finishing requests in flight");
        tracing::info!(
            "shutting down: finishing requests in flight (at most {}, server.shutdown_grace)",
            units::format_duration(grace)
        );
        running.shutdown(grace).await;
        Ok(())
    })
}

/// SIGTERM and SIGINT, registered when made: a signal that arrives while Shellac is still
/// starting is kept for [`StopSignals::wait`] instead of killing the process.
struct StopSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    /// Must be called inside the runtime.
    fn register() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    async fn wait(self) {
        #[cfg(unix)]
        if let (Some(mut term), Some(mut int)) = (self.term, self.int) {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn wait_for_signal() {
    StopSignals::register().wait().await;
}

fn run_demo(listen: SocketAddr, admin: SocketAddr) -> anyhow::Result<()> {
    let rt = runtime(shellac::config::ServerConfig::default().worker_threads())?;
    rt.block_on(async move {
        let origin = demo::start_origin(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let mut config = Config::embedded_default();
        config
            .apply(&CliOverrides {
                listen: vec![listen],
                backend: Some((origin.ip().to_string(), origin.port())),
                admin: Some(admin),
                cache_size: None,
                vcl: None,
            })
            .map_err(|e| anyhow::anyhow!("{}", e[0]))?;
        let running = server::start(Arc::new(config)).await.context(
            "is another Shellac (or Varnish) running? pick free ports with --listen and --admin",
        )?;
        let proxy = running.listen[0];
        let admin = running.admin.expect("admin configured");
        say!("Shellac demo is running.");
        say!("  origin (built-in) http://{origin}/   answers in {} ms, Cache-Control: public, max-age=60", demo::ORIGIN_DELAY.as_millis());
        say!("  shellac (cache)   http://{proxy}/");
        say!("  admin             http://{admin}/stats");
        say!();
        say!("Try it: the first request is a miss, the second a hit (note Cache-Status and Age):");
        say!("  curl -si http://{proxy}/hello | grep -iE '^(HTTP|age|cache-status)'");
        say!("  curl -si http://{proxy}/hello | grep -iE '^(HTTP|age|cache-status)'");
        say!("  curl -si http://{proxy}/private | grep -i cache-status   # never stored");
        say!("  curl -s  http://{admin}/stats | grep -E 'cache_(hit|miss)\"'");
        say!();
        say!("Self-check, two requests for /:");
        for _ in 0..2 {
            match demo::probe(proxy, "/").await {
                Ok((status, cache_status, age, took)) => say!(
                    "  {status:<16} Cache-Status: {cache_status:<34} Age: {age:<3} {:>4} ms",
                    took.as_millis()
                ),
                Err(e) => say!("  request failed: {e}"),
            }
        }
        say!();
        say!("Press Ctrl-C to stop.");
        wait_for_signal().await;
        running.shutdown(Duration::from_secs(2)).await;
        Ok(())
    })
}

/// Sends `body` to an admin POST endpoint and prints the JSON answer; fails on a non-2xx.
fn admin_post(admin: &AdminClient, path: &str, body: &str) -> anyhow::Result<()> {
    let resp = admin.request_with_body("POST", path, body.as_bytes())?;
    let value: serde_json::Value =
        serde_json::from_str(&resp.body).context("admin listener did not return JSON")?;
    if !(200..300).contains(&resp.status) {
        bail!("{}", value["error"].as_str().unwrap_or(&resp.body));
    }
    say!(
        "{}",
        serde_json::to_string_pretty(&value).unwrap_or_default()
    );
    Ok(())
}

/// `shellac stats`: the counters grouped by area (the word before the first `_`: `client`,
/// `cache`, `backend`, ...; the areas in the order their first non-zero counter is declared),
/// a blank line between areas; zeros (mostly features not in use, such as `acme_*`) are left
/// out and counted on the last line unless `all`.
fn stats(admin: &AdminClient, all: bool) -> anyhow::Result<()> {
    let map = admin.get_json("/stats")?;
    let map = map
        .as_object()
        .context("admin listener did not return an object")?;
    let width = map.keys().map(|k| k.len()).max().unwrap_or(0);
    let area = |k: &str| k.split('_').next().unwrap_or(k).to_string();
    let zero = |v: &serde_json::Value| v.as_f64() == Some(0.0);
    let mut areas: Vec<(String, Vec<(&String, &serde_json::Value)>)> = Vec::new();
    let mut zeros = Vec::new();
    for (k, v) in map {
        if zero(v) && !all {
            zeros.push(k.as_str());
            continue;
        }
        let a = area(k);
        match areas.iter_mut().find(|(name, _)| *name == a) {
            Some((_, rows)) => rows.push((k, v)),
            None => areas.push((a, vec![(k, v)])),
        }
    }
    for (i, (_, rows)) in areas.iter().enumerate() {
        if i > 0 {
            say!();
        }
        for (k, v) in rows {
            say!("{k:<width$}  {v}");
        }
    }
    if !zeros.is_empty() {
        let mut by_area: Vec<(String, usize)> = Vec::new();
        for k in &zeros {
            let a = area(k);
            match by_area.iter_mut().find(|(name, _)| *name == a) {
                Some((_, n)) => *n += 1,
                None => by_area.push((a, 1)),
            }
        }
        let list: Vec<String> = by_area.iter().map(|(a, n)| format!("{a}_* {n}")).collect();
        say!();
        say!(
            "({} counters are 0, not shown: {}; --all shows them)",
            zeros.len(),
            list.join(", ")
        );
    }
    Ok(())
}

/// `shellac upgrade`: POST /upgrade, the old and new process ids, or why not.
fn upgrade(admin: &AdminClient) -> anyhow::Result<()> {
    let resp = admin.request("POST", "/upgrade")?;
    let v: serde_json::Value = serde_json::from_str(&resp.body).unwrap_or_default();
    if resp.status != 200 {
        bail!(
            "upgrade failed, the running process serves on: {}",
            v["error"].as_str().unwrap_or(resp.body.trim())
        );
    }
    say!(
        "upgraded: pid {} → pid {} ({})",
        v["old_pid"],
        v["new_pid"],
        v["binary"].as_str().unwrap_or_default()
    );
    Ok(())
}

fn reload(admin: &AdminClient) -> ExitCode {
    let resp = match admin.request("POST", "/reload") {
        Ok(r) => r,
        Err(e) => {
            eprintln!("shellac: {e}");
            if let Some(hint) = unreachable_hint(&e.into()) {
                eprintln!("shellac: {hint}");
            }
            return ExitCode::FAILURE;
        }
    };
    let v: serde_json::Value = serde_json::from_str(&resp.body).unwrap_or_default();
    if resp.status == 200 {
        say!("reloaded: configuration generation {}", v["generation"]);
        for c in v["changes"].as_array().into_iter().flatten() {
            say!("  {}", c.as_str().unwrap_or_default());
        }
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "reload rejected; still running configuration generation {}:",
            v["generation"]
        );
        for e in v["errors"].as_array().into_iter().flatten() {
            eprintln!("error: {}", e.as_str().unwrap_or_default());
        }
        if v["errors"].is_null() {
            eprintln!("status {}: {}", resp.status, resp.body.trim());
        }
        ExitCode::FAILURE
    }
}
