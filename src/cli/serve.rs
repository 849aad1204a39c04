//! `shellac serve`: the configuration loaded and checked against the machine, the runtime,
//! the listeners started, the signals (stop, reload, reopen the log, upgrade) handled.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};

use shellac::config::{CliOverrides, Config, units};
use shellac::reload::{ConfigSource, Live};
use shellac::server;
use shellac::service::handover::Channel;
use shellac::vcl::attach::Programs;

use super::check::print_errors;
use super::early_signals;

pub(super) fn parse_backend(spec: &str) -> anyhow::Result<(String, u16)> {
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

pub(super) fn runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        // The main thread's size, not tokio's 2 MiB: a reload compiles VCL on a worker and
        // requests run it there, and a VCL nested to the parser's 200-level limit needs more
        // than 2 MiB in a debug build (tests/reload/deep_vcl.rs). Untouched pages cost nothing.
        .thread_stack_size(WORKER_STACK)
        // Access-log records wait in a per-worker batch while the worker is busy.
        .on_thread_park(shellac::txlog::worker_parks)
        .enable_all()
        .build()?)
}

/// `shellac serve`: the configuration (`file`, else the embedded default) with the
/// command line's overrides, checked as `shellac check` checks it, then served until a stop
/// signal or an upgrade hands over.
pub(super) fn serve(
    file: Option<PathBuf>,
    listen: Vec<SocketAddr>,
    backend: Option<String>,
    admin: Option<SocketAddr>,
    cache_size: Option<u64>,
    vcl: Option<PathBuf>,
) -> anyhow::Result<()> {
    // Before anything else: a stop, reload or reopen signal during start-up must not kill
    // the process with its default action (cli/early_signals.rs).
    early_signals::catch();
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
    let overrides = CliOverrides {
        listen,
        backend: backend.as_deref().map(parse_backend).transpose()?,
        admin,
        cache_size,
        vcl,
    };
    let name = file.as_ref().map_or_else(
        || "<embedded default>".to_string(),
        |p| p.display().to_string(),
    );
    tracing::info!(config = %name, "starting: reading the configuration");
    let (config, program) = load(file.as_deref(), &name, &overrides)?;
    if stopped_while_starting() {
        return Ok(());
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
    // The disk index is rebuilt on a thread of its own while the rest starts (the data file is
    // checked by `load` and released by a process this one replaces, above).
    if let Some(disk) = &config.storage.disk {
        shellac::cache::disk::open_ahead(disk);
    }
    let rt = runtime(config.server.worker_threads())?;
    rt.block_on(run(config, program, source, overrides, name, handover))
}

/// Whether SIGTERM or SIGINT came during start-up (then said in the log): the caller stops
/// before the next step and exits as after a normal stop.
fn stopped_while_starting() -> bool {
    let Some(signal) = early_signals::stop_asked() else {
        return false;
    };
    tracing::info!("{signal} during start-up: stopped before serving");
    true
}

/// The configuration read from `file` (named `name`; none: the embedded default), the
/// overrides applied and its VCL compiled, refused with every error when `shellac check`
/// would refuse it (what the machine says included).
fn load(
    file: Option<&Path>,
    name: &str,
    overrides: &CliOverrides,
) -> anyhow::Result<(Config, Programs)> {
    let (mut config, text) = match file {
        Some(path) => Config::load_text(path).map_err(|e| {
            print_errors(&e);
            anyhow::anyhow!("invalid configuration")
        })?,
        None => (
            Config::embedded_default(),
            shellac::config::DEFAULT_CONFIG.to_string(),
        ),
    };
    let program = shellac::vcl::attach::attach(&mut config, overrides.vcl.as_deref())
        .and_then(|program| config.apply(overrides).map(|()| program))
        .map_err(|e| {
            print_errors(&e);
            anyhow::anyhow!(
                "invalid command-line overrides or VCL ({} error{})",
                e.len(),
                if e.len() == 1 { "" } else { "s" }
            )
        })?;
    // What `shellac check` says about the machine, before anything starts.
    let (errors, warnings) = shellac::preflight::check_machine(&config, &text, name);
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
    Ok((config, program))
}

/// Starts everything, tells systemd (or the process this one replaces) it serves, and serves
/// until a stop signal or a finished upgrade; then drains within `server.shutdown_grace`.
async fn run(
    config: Config,
    program: Programs,
    source: ConfigSource,
    overrides: CliOverrides,
    name: String,
    handover: Option<Channel>,
) -> anyhow::Result<()> {
    let stop = StopSignals::register();
    // Registered before anything listens or systemd is told it serves: a SIGHUP (a
    // process manager's reload) that comes in the meantime waits for the proxy instead of
    // ending the process (the default action of SIGHUP, SIGUSR1 and SIGUSR2).
    #[cfg(unix)]
    let signals = OtherSignals::register();
    // From here on tokio sees every signal; what came before, it is told now. A stop before
    // anything started ends here, except in an upgrade: the old process released the disk
    // tier to this one, so this one starts and then stops as usual (draining, sealing it).
    if handover.is_none() && stopped_while_starting() {
        return Ok(());
    }
    early_signals::hand_over();
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
        config = %name,
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
    signals.handle(&running.live);
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
}

/// SIGUSR1 reopens the access log, SIGUSR2 upgrades to the binary at this process's path,
/// SIGHUP reloads the configuration. Registered when made (a signal that arrives while
/// Shellac is still starting is kept, not fatal); handled by [`OtherSignals::handle`], a task
/// each, for the life of the process.
#[cfg(unix)]
struct OtherSignals {
    usr1: Option<tokio::signal::unix::Signal>,
    usr2: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
}

#[cfg(unix)]
impl OtherSignals {
    /// Must be called inside the runtime.
    fn register() -> OtherSignals {
        use tokio::signal::unix::{SignalKind, signal};
        OtherSignals {
            usr1: signal(SignalKind::user_defined1()).ok(),
            usr2: signal(SignalKind::user_defined2()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
        }
    }

    /// Handles them from now on, on `running` (signals kept since [`OtherSignals::register`]
    /// are handled at once).
    fn handle(self, running: &Arc<Live>) {
        let live = running.clone();
        if let Some(mut usr1) = self.usr1 {
            tokio::spawn(async move {
                while usr1.recv().await.is_some() {
                    tracing::info!("SIGUSR1: reopening the access log");
                    live.load().shared.recorder.reopen();
                }
            });
        }
        let live = running.clone();
        if let Some(mut usr2) = self.usr2 {
            tokio::spawn(async move {
                while usr2.recv().await.is_some() {
                    tracing::info!("SIGUSR2: upgrading to the binary at this process's path");
                    if let Err(e) = shellac::upgrade::perform(live.clone()).await {
                        tracing::error!("upgrade failed, this process serves on: {e}");
                    }
                }
            });
        }
        let live = running.clone();
        if let Some(mut hup) = self.hup {
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

pub(super) async fn wait_for_signal() {
    StopSignals::register().wait().await;
}
