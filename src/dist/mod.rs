//! What the Debian package ships besides the binary, generated from the sources it describes:
//! manual pages (`shellac(8)` and one per subcommand from the clap definitions,
//! `shellac.toml(5)` from the setting definitions, `shellac-vcl(7)` from docs/vcl.md), shell
//! completions and the installed configuration file. `shellac dist DIR` (hidden) writes them;
//! packaging/build-deb.sh calls it with the binary it packages, so nothing here is checked in.

pub mod roff;

use std::io;
use std::path::{Path, PathBuf};

use clap::Command;
use clap_complete::Shell;

use crate::config::settings::render;

/// docs/vcl.md, the source of `shellac-vcl(7)`.
const VCL_MD: &str = include_str!("../../docs/vcl.md");
/// docs/configuration.md, whose tables are rendered again from the definitions.
const CONFIGURATION_MD: &str = include_str!("../../docs/configuration.md");

/// What the installed `/etc/shellac/shellac.toml` adds, commented, to the embedded default:
/// the packaged layout's paths.
const CONFFILE_TAIL: &str = r#"
# Installed by the Debian package as /etc/shellac/shellac.toml: the embedded default above
# (what `shellac serve` runs without --config). Your changes are kept across upgrades.
# Every setting: man 5 shellac.toml. Check a change with `shellac check
# /etc/shellac/shellac.toml`, apply it with `systemctl reload shellac` (refused, with every
# error, when the new file is wrong: the running configuration stays).
#
# The service runs as the `shellac` user, which may write only /var/cache/shellac and
# /var/log/shellac. The access log (reopened on SIGUSR1; /etc/logrotate.d/shellac rotates it):
#
# [log]
# access_log = "/var/log/shellac/access.log"
#
# The disk tier (kept across restarts and `shellac upgrade`):
#
# [storage.disk]
# path = "/var/cache/shellac/cache.dat"
# size = "4GiB"
"#;

/// The installed configuration file: the embedded default and the packaged layout, commented.
pub fn conffile() -> String {
    format!("{}{CONFFILE_TAIL}", crate::config::DEFAULT_CONFIG)
}

/// Every manual page: (file name, section, roff text).
pub fn manual_pages(cli: Command) -> Result<Vec<(String, &'static str, String)>, String> {
    let version = env!("CARGO_PKG_VERSION");
    let mut cli = cli;
    cli.build();
    let mut pages = Vec::new();
    let subcommands: Vec<Command> = cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .cloned()
        .collect();
    let mut see_also: Vec<String> = subcommands
        .iter()
        .map(|s| format!("shellac\\-{}(8)", s.get_name()))
        .collect();
    see_also.extend([
        "shellac.toml(5)".into(),
        "shellac\\-vcl(7)".into(),
        "systemctl(1)".into(),
    ]);
    let main = clap_mangen::Man::new(cli.clone())
        .section("8")
        .manual("Shellac")
        .source(format!("shellac {version}"));
    let mut text = render(&main)?;
    text.push_str(FILES);
    text.push_str(&format!(".SH \"SEE ALSO\"\n{}\n", see_also.join(", ")));
    pages.push(("shellac.8".to_string(), "8", text));
    for sub in subcommands {
        let name = format!("shellac-{}", sub.get_name());
        let cmd = sub.clone().name(name.clone());
        let man = clap_mangen::Man::new(cmd)
            .section("8")
            .manual("Shellac")
            .source(format!("shellac {version}"));
        let mut text = render(&man)?;
        text.push_str(".SH \"SEE ALSO\"\nshellac(8), shellac.toml(5)\n");
        pages.push((format!("{name}.8"), "8", text));
    }
    let reference = render::configuration_md(CONFIGURATION_MD)?;
    pages.push((
        "shellac.toml.5".into(),
        "5",
        roff::page(
            "shellac.toml",
            "5",
            "Shellac configuration file",
            version,
            &reference,
        ),
    ));
    pages.push((
        "shellac-vcl.7".into(),
        "7",
        roff::page(
            "shellac-vcl",
            "7",
            "running Varnish VCL in Shellac",
            version,
            VCL_MD,
        ),
    ));
    Ok(pages)
}

/// The FILES section of `shellac(8)`: the packaged layout.
const FILES: &str = r#".SH FILES
.TP
\fI/etc/shellac/shellac.toml\fR
The configuration file the service runs with (see \fBshellac.toml\fR(5)).
.TP
\fI/var/cache/shellac\fR
Where the disk tier's file goes; owned by the \fBshellac\fR user, removed on purge.
.TP
\fI/var/log/shellac\fR
Where the access log goes; rotated by \fI/etc/logrotate.d/shellac\fR (the file is reopened on SIGUSR1).
.TP
\fIshellac.service\fR, \fIshellac.socket\fR
The systemd units: \fBsystemctl reload shellac\fR runs \fBshellac reload\fR;
\fBshellac upgrade\fR replaces the running binary without closing a listening socket.
"#;

fn render(man: &clap_mangen::Man) -> Result<String, String> {
    let mut buf = Vec::new();
    man.render(&mut buf).map_err(|e| e.to_string())?;
    String::from_utf8(buf).map_err(|e| e.to_string())
}

/// Shell completions: (path under the output folder, script), for bash, zsh and fish.
pub fn completions(cli: Command) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (shell, path) in [
        (Shell::Bash, "completions/bash/shellac"),
        (Shell::Zsh, "completions/zsh/_shellac"),
        (Shell::Fish, "completions/fish/shellac.fish"),
    ] {
        let mut cmd = cli.clone();
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, "shellac", &mut buf);
        out.push((path, String::from_utf8_lossy(&buf).into_owned()));
    }
    out
}

/// Writes every generated file under `dir`: `man/man8/shellac.8`, ..., `completions/...`,
/// `shellac.toml`. Returns the paths written.
pub fn write_all(cli: Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut put = |rel: &str, text: &str| -> io::Result<()> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text)?;
        written.push(path);
        Ok(())
    };
    let pages = manual_pages(cli.clone()).map_err(io::Error::other)?;
    for (name, section, text) in &pages {
        put(&format!("man/man{section}/{name}"), text)?;
    }
    for (path, text) in completions(cli) {
        put(path, &text)?;
    }
    put("shellac.toml", &conffile())?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_conffile_is_the_embedded_default_plus_comments() {
        let meaningful = |t: &str| -> Vec<String> {
            t.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            meaningful(&conffile()),
            meaningful(crate::config::DEFAULT_CONFIG)
        );
    }

    #[test]
    fn the_conffiles_commented_settings_are_valid_uncommented() {
        let uncommented: String = conffile()
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest) if rest.starts_with('[') || rest.contains(" = ") => rest,
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(uncommented.contains("\n[storage.disk]\n"), "{uncommented}");
        let (config, errors) = Config::read(&uncommented, "shellac.toml");
        assert!(errors.is_empty(), "{errors:?}");
        let config = config.expect("read");
        assert_eq!(config.log.access_log, "/var/log/shellac/access.log");
    }

    #[test]
    fn the_configuration_page_names_every_setting() {
        let cli = Command::new("shellac").subcommand(Command::new("serve"));
        let pages = manual_pages(cli).expect("pages");
        let (_, _, toml5) = pages
            .iter()
            .find(|(n, _, _)| n == "shellac.toml.5")
            .expect("shellac.toml(5)");
        // Every setting but the tables (`[storage.disk]` is a section of its own there).
        for s in crate::config::settings::all()
            .filter(|s| !matches!(s.kind, crate::config::settings::Kind::Table { .. }))
        {
            assert!(
                toml5.contains(&format!("\\fB{}\\fR", roff::escape(s.key))),
                "{}.{} missing from shellac.toml(5)",
                s.section,
                s.key
            );
        }
        assert!(pages.iter().any(|(n, _, _)| n == "shellac-serve.8"));
        assert!(pages.iter().any(|(n, _, _)| n == "shellac-vcl.7"));
    }
}
