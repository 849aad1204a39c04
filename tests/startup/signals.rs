//! Signals during start-up (issue 31): a SIGTERM, SIGINT or SIGHUP that comes while
//! `shellac serve` reads its configuration — before the running server's handlers exist —
//! never kills it with the signal's default action. A stop ends it cleanly before anything
//! listens; a reload happens once it serves.
//!
//! The signal comes during start-up by construction, not by luck: the policy file is a named
//! pipe, so `serve` waits in its read of the configuration until the test, having sent the
//! signal, writes the VCL into it. (These tests used to race a slow VCL compile against
//! `kill(1)`; on a busy machine a late signal could lose that race every time.)

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use super::*;

/// A VCL answering every request `synth(200, word)` (well under PIPE_BUF: one write).
fn vcl(word: &str) -> String {
    format!(
        "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"9\"; }}\nsub vcl_recv {{\n  return (synth(200, \"{word}\"));\n}}\n"
    )
}

/// Writes `text` to `path` whole at once (a rename), as a deploy tool replaces a file.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A configuration in `dir` whose policy, `policy.vcl`, is a named pipe nobody writes yet.
fn blocked_config(dir: &Path) -> PathBuf {
    let pipe = std::ffi::CString::new(dir.join("policy.vcl").to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo(3) only creates the file.
    assert_eq!(unsafe { libc::mkfifo(pipe.as_ptr(), 0o600) }, 0, "mkfifo");
    write_config(
        dir,
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\n\n[vcl]\nfile = \"policy.vcl\"\n",
    )
}

/// The pipe at `path` opened for writing once `serve` opened it for reading (bounded: 20 s;
/// a non-blocking open fails with ENXIO until a reader is there).
fn writer(path: &Path) -> std::fs::File {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => return f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("shellac never opened {} to read it: {e}", path.display()),
        }
    }
}

/// SIGTERM and SIGINT during start-up end the process as a normal stop does (exit 0, a line
/// saying so), with nothing listening first.
#[test]
fn a_stop_signal_during_start_up_ends_it_cleanly() {
    for (signal, name) in [("-TERM", "SIGTERM"), ("-INT", "SIGINT")] {
        let dir = TempDir::new("early-stop");
        let config = blocked_config(&dir.0);
        let mut serving = Serving::start(&config);
        serving.wait_for("starting: reading the configuration");
        serving.signal(signal);
        // Only now can the read of the configuration finish.
        writer(&dir.0.join("policy.vcl"))
            .write_all(vcl("one").as_bytes())
            .unwrap();
        let (code, log) = serving.exit();
        assert_eq!(
            code,
            Some(0),
            "{name}: not a clean exit (None: killed):\n{log}"
        );
        assert!(
            log.contains(&format!("{name} during start-up: stopped before serving")),
            "{log}"
        );
        assert!(!log.contains("listening on"), "half-started:\n{log}");
    }
}

/// SIGHUP during start-up (`systemctl reload` right after `start`) is kept: once serving,
/// Shellac reloads, so a policy file replaced after it was read is in force — the answer
/// says the new word — and the process serves on until SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_during_start_up_reloads_once_serving() {
    let dir = TempDir::new("early-hup");
    let config = blocked_config(&dir.0);
    let policy = dir.0.join("policy.vcl");
    let mut serving = Serving::start(&config);
    serving.wait_for("starting: reading the configuration");
    serving.signal("-HUP");
    // The start-up reads "one" from the pipe it opened; the file a reload reads says "two".
    let mut pipe = writer(&policy);
    replace(&policy, &vcl("two"));
    pipe.write_all(vcl("one").as_bytes()).unwrap();
    drop(pipe);
    // In the order the log says them.
    serving.wait_for("SIGHUP came during start-up: handled now that the server runs");
    let proxy = serving.proxy();
    serving.wait_for("SIGHUP: reloading the configuration");
    serving.wait_for("configuration reloaded");
    let r = get(proxy, "/").await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains("two"), "{}", r.text());
    serving.signal("-TERM");
    let (code, log) = serving.exit();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("shutting down"), "{log}");
}
