//! `shellac check` on a VCL the file gives: written as a file and checked as the `[vcl] file`
//! of a configuration with the mapped settings (or alone), within a time limit; its first
//! error read without the runner's temporary paths.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::context::{Halt, Step, skip};
use super::outcome::Wiring;
use super::params::Settings;

/// How one VCL check came out.
pub struct Checked {
    pub accepted: bool,
    pub output: String,
}

/// Writes `text` as `dir/NAME.vcl` and checks it with `shellac check --file-only`: as the
/// `[vcl] file` of a configuration with `settings` when `serve` takes VCL (the path `serve`
/// compiles it by), else the VCL file itself.
pub fn check_vcl(
    shellac: &Path,
    wiring: Wiring,
    settings: &Settings,
    dir: &Path,
    name: &str,
    text: &str,
) -> Step<(PathBuf, Checked)> {
    let path = dir.join(format!("{name}.vcl"));
    std::fs::write(&path, text).map_err(|e| Halt::Fail(format!("{}: {e}", path.display())))?;
    let target = if wiring.serve {
        let cfg = dir.join(format!("check-{name}.toml"));
        std::fs::write(&cfg, settings.toml(None, None, Some(&path), dir))
            .map_err(|e| Halt::Fail(format!("{}: {e}", cfg.display())))?;
        cfg
    } else if wiring.check {
        path.clone()
    } else {
        return skip(
            "VCL not wired: neither `shellac check FILE.vcl` nor `[vcl] file` is on main yet",
        );
    };
    let mut cmd = Command::new(shellac);
    cmd.arg("check")
        .arg("--file-only")
        .arg(&target)
        .env("NO_COLOR", "1");
    let (success, output) = output_within(&mut cmd, CHECK_LIMIT)
        .map_err(|e| Halt::Fail(format!("shellac check {}: {e}", target.display())))?;
    Ok((
        path,
        Checked {
            accepted: success,
            output,
        },
    ))
}

/// How long one `shellac check` may take.
const CHECK_LIMIT: Duration = Duration::from_secs(30);

/// Runs `cmd` to its end: whether it exited 0, and its stdout then stderr. Killed (an
/// error) past `limit`.
pub(super) fn output_within(cmd: &mut Command, limit: Duration) -> std::io::Result<(bool, String)> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = super::sock::spawn(cmd)?;
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as _));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as _));
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "did not finish in {} s",
                limit.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let text = |t: std::thread::JoinHandle<Vec<u8>>| {
        String::from_utf8_lossy(&t.join().unwrap_or_default()).into_owned()
    };
    Ok((status.success(), format!("{}{}", text(out), text(err))))
}

/// The first error of a check's output, without the runner's temporary path: `vclN.vcl:L:C:
/// message` becomes `message (vclN.vcl:L:C)`, so that like errors read alike in the table.
pub fn first_error(output: &str) -> String {
    let line = output
        .lines()
        .find(|l| l.contains("error"))
        .or_else(|| output.lines().find(|l| l.contains(':')))
        .unwrap_or("")
        .trim();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    let text = ["vcl:", "toml:"]
        .iter()
        .find_map(|ext| {
            let at = line.find(ext)?;
            let start = line[..at].rfind('/').map_or(0, |s| s + 1);
            let rest = &line[at + ext.len()..];
            // line:col: message
            let mut parts = rest.splitn(3, ':');
            let (l, c, msg) = (parts.next()?, parts.next()?, parts.next()?);
            Some(format!(
                "{} ({}{}:{l}:{c})",
                msg.trim(),
                &line[start..at],
                &ext[..ext.len() - 1],
            ))
        })
        .unwrap_or_else(|| line.to_string());
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_errors_read_without_paths() {
        assert_eq!(
            super::first_error(
                "error: /tmp/shellac-vtc.1.0/b1.2/v1/vcl1.vcl:8:3: not supported: ESI\nmore"
            ),
            "not supported: ESI (vcl1.vcl:8:3)"
        );
        assert_eq!(
            super::first_error("x.toml: OK\nerror: /t/check1.toml:3:2: `cache.x`: bad"),
            "`cache.x`: bad (check1.toml:3:2)"
        );
    }
}
