//! The commands of the `shellac` binary, one file each (or a family: `admin.rs` for those
//! that talk to a running Shellac), and [`run`], which runs one and says how the process exits.

mod admin;
pub(crate) mod args;
mod check;
mod demo;
mod early_signals;
mod serve;

use std::process::ExitCode;
use std::time::Duration;

use clap::CommandFactory;

use shellac::console;

use args::{AdminCommand, Cli, Command, unreachable_hint};

/// How often `shellac top` redraws.
const TOP_EVERY: Duration = Duration::from_secs(2);

/// Runs `command`; an error is printed (with how to reach the admin listener when it could
/// not be), a closed stdout is no error.
pub(crate) fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Check {
            file,
            config,
            file_only,
            online,
        } => {
            // clap requires one of the two.
            let file = file.or(config).unwrap_or_default();
            return check::check(&file, file_only, online);
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
        } => serve::serve(config, listen, backend, admin, cache_size, vcl),
        Command::Demo { listen, admin } => demo::run(listen, admin),
        Command::Admin(command) => return talk(command),
    };
    finish(result)
}

/// Runs a command that talks to a running Shellac over its admin listener.
fn talk(command: AdminCommand) -> ExitCode {
    let result = match command {
        AdminCommand::Stats { admin, all } => admin::stats(&admin.client(), all),
        AdminCommand::Reload { admin } => return admin::reload(&admin.client()),
        AdminCommand::Upgrade { admin } => admin::upgrade(&admin.client()),
        AdminCommand::Stat {
            admin,
            once,
            all,
            site,
        } => {
            console::stat(&admin.client(), once, all, site.as_deref()).map_err(anyhow::Error::from)
        }
        AdminCommand::Top {
            admin,
            once,
            by,
            sort,
            window,
            rows,
            site,
        } => {
            let query = admin::top_query(&by, &sort, window, rows, site.as_deref());
            console::top(&admin.client(), &query, once, TOP_EVERY).map_err(anyhow::Error::from)
        }
        AdminCommand::Log {
            admin,
            url,
            status,
            miss,
            backend,
            site,
            reason,
            json,
        } => {
            let query = match admin::log_query(
                url.as_deref(),
                status.as_deref(),
                miss,
                backend.as_deref(),
                site.as_deref(),
                reason.as_deref(),
            ) {
                Ok(q) => q,
                Err(e) => {
                    eprintln!("shellac: --url: {e}");
                    return ExitCode::from(2);
                }
            };
            console::log(&admin.client(), &query, json).map_err(anyhow::Error::from)
        }
        AdminCommand::Inspect {
            url,
            host,
            json,
            admin,
        } => match console::inspect(&admin.client(), &url, host.as_deref(), json) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e.into()),
        },
        AdminCommand::Ban { expr, admin } => admin::admin_post(&admin.client(), "/ban", &expr),
        AdminCommand::Backend {
            name,
            health,
            admin,
        } => admin::admin_post(
            &admin.client(),
            &format!("/backends/{name}/health"),
            &health,
        ),
        AdminCommand::Purge {
            url,
            soft,
            tag,
            admin,
        } => match url {
            Some(url) => admin::admin_post(
                &admin.client(),
                if soft { "/purge?soft=1" } else { "/purge" },
                &url,
            ),
            None => admin::admin_post(&admin.client(), "/purge/tags", &tag.join(" ")),
        },
    };
    finish(result)
}

/// How the process exits after a command that returned `result`.
fn finish(result: anyhow::Result<()>) -> ExitCode {
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

/// Whether `e` is (or was caused by) writing to a pipe whose reader has closed.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
