//! The command line's grammar (clap): the commands and their arguments, and how a command
//! that talks to a running Shellac finds its admin listener.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use shellac::client::AdminClient;
use shellac::config::units;

/// Shellac: a caching HTTP reverse proxy (web accelerator).
#[derive(Parser)]
#[command(name = "shellac", version, about, long_about = None, after_help = "Quick start:\n  shellac demo                       built-in origin + cache, shows a miss then a hit\n  shellac serve --backend 127.0.0.1:8080\n  shellac check /etc/shellac/shellac.toml\n  shellac stat | top | log           watch a running instance\n  shellac inspect http://HOST/path   what is cached for a URL (tiers, TTL left, size, tags)")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
    /// Validate a configuration file (or a VCL file) and check it against this machine.
    ///
    /// The file is read, then checked against this machine as `serve` would (addresses,
    /// access log and disk tier paths, free space): exit 0 with a summary, or 1 with every
    /// error found. Warnings (a port held by the running Shellac this file is for, ...) do not
    /// fail it; a port another process holds does. A `.vcl` file is compiled and every error
    /// reported with file:line:column.
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
    /// The commands that talk to a running Shellac over its admin listener.
    #[command(flatten)]
    Admin(AdminCommand),
    /// Run Varnish's own test scripts (.vtc, varnishtest) against this Shellac.
    ///
    /// Each `varnish vN` is a `shellac serve` process; a file needing what Shellac or the
    /// runner does not have is skipped with its reason (docs/varnishtest.md). Exit 1 if one
    /// failed.
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

/// The commands that talk to a running Shellac over its admin listener (`AdminArgs`), in the
/// order `shellac --help` lists them.
#[derive(Subcommand)]
pub(crate) enum AdminCommand {
    /// Print the counters of a running Shellac once (GET /stats on its admin listener).
    Stats {
        #[command(flatten)]
        admin: AdminArgs,
        /// Show counters that are zero too (by default they are counted on the last line).
        #[arg(short, long)]
        all: bool,
    },
    /// Live counters of a running Shellac, refreshed every second (like varnishstat).
    ///
    /// Value, change per second and average per second of every counter, hit ratios over
    /// 10/100/1000 s, TTFB percentiles.
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
    /// Live stream of transactions (like varnishlog / varnishncsa).
    ///
    /// One line per transaction: method, URL, status, cache decision and reason, backend,
    /// timings. Filters combine.
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
    /// Make a running Shellac re-read its configuration file (same as SIGHUP).
    ///
    /// Prints what changed, or every error (the running configuration is then kept) and
    /// exits 1.
    Reload {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Set a backend's health by hand (like Varnish's `backend.set_health`).
    ///
    /// `sick` takes it out of rotation (maintenance), `healthy` puts it in whatever its probe
    /// says, `auto` gives it back to probes (POST /backends/NAME/health). NAME may hold `*`.
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
    /// Replace the running Shellac with the binary now at its path, keeping its sockets.
    ///
    /// No listening socket is closed (POST /upgrade): the new process takes the sockets and
    /// the disk tier, the old one drains and exits. Exits 1, the old process serving on, when
    /// the new binary fails to start.
    Upgrade {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Ban cached objects by expression, e.g. `shellac ban 'req.url ~ ^/news/'`.
    ///
    /// Fields: req.url, req.http.host, req.http.NAME (the looking-up request), obj.status,
    /// obj.http.NAME; operators ~ !~ == !=; join
    /// conditions with &&. Applies to everything cached before now.
    Ban {
        /// The ban expression.
        expr: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Show what is cached for a URL: variants, tiers, TTL left, size, tags.
    ///
    /// Every variant, the tiers holding it (memory, disk), status, size, age, TTL / grace /
    /// keep / stale-if-error left, tags, ETag and Last-Modified (GET /cache on the admin
    /// listener). An inspection is not a hit: nothing is
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
    ///
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
}

/// How to reach a running Shellac's admin listener.
#[derive(clap::Args, Clone)]
pub(crate) struct AdminArgs {
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
    pub(super) fn client(&self) -> AdminClient {
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
pub(super) fn unreachable_hint(e: &anyhow::Error) -> Option<String> {
    let io = e.chain().find_map(|c| c.downcast_ref::<std::io::Error>())?;
    let from = ADMIN_FROM.get()?;
    shellac::client::is_unreachable(io).then(|| shellac::client::unreachable_hint(from))
}

fn parse_size(s: &str) -> Result<u64, String> {
    units::parse_size(s)
}
