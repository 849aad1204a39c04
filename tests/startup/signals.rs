//! Signals during start-up (issue 31): a SIGTERM, SIGINT or SIGHUP that comes while
//! `shellac serve` reads its configuration — before the running server's handlers exist —
//! never kills it with the signal's default action. A stop ends it cleanly before anything
//! listens; a reload happens once it serves.

use super::*;

/// A VCL that the debug binary takes a while to compile (20,000 `if`s), so that a signal
/// sent once the log says `starting:` comes while the configuration is still being read;
/// every request is answered `synth(200, word)`.
fn slow_vcl(word: &str) -> String {
    let mut vcl = String::from(
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"9\"; }\nsub vcl_recv {\n",
    );
    for i in 0..20_000 {
        vcl.push_str(&format!(
            "  if (req.url == \"/p{i}\") {{ set req.http.x-p = \"{i}\"; }}\n"
        ));
    }
    vcl.push_str(&format!("  return (synth(200, \"{word}\"));\n}}\n"));
    vcl
}

/// Writes `text` to `path` whole at once (a rename), as a deploy tool replaces a file.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A configuration whose policy is `policy.vcl` in `dir`, saying `word`.
fn slow_config(dir: &Path, word: &str) -> PathBuf {
    replace(&dir.join("policy.vcl"), &slow_vcl(word));
    write_config(
        dir,
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\n\n[vcl]\nfile = \"policy.vcl\"\n",
    )
}

/// SIGTERM and SIGINT during start-up end the process as a normal stop does (exit 0, a line
/// saying so), with nothing listening first. A signal that happens to come after the
/// handlers exist is a normal stop too; the bounded loop tries again until one came before
/// (the first try does: the VCL takes far longer to compile than a kill(1) takes).
#[test]
fn a_stop_signal_during_start_up_ends_it_cleanly() {
    let dir = TempDir::new("early-stop");
    let config = slow_config(&dir.0, "one");
    for (signal, name) in [("-TERM", "SIGTERM"), ("-INT", "SIGINT")] {
        let mut early = false;
        for _ in 0..5 {
            let mut serving = Serving::start(&config);
            serving.wait_for("starting: reading the configuration");
            serving.signal(signal);
            let (code, log) = serving.exit();
            assert_eq!(
                code,
                Some(0),
                "{name}: not a clean exit (None: killed):\n{log}"
            );
            if log.contains(&format!("{name} during start-up: stopped before serving")) {
                assert!(!log.contains("listening on"), "half-started:\n{log}");
                early = true;
                break;
            }
            assert!(log.contains("shutting down"), "{log}");
        }
        assert!(early, "{name} never came during start-up in 5 tries");
    }
}

/// SIGHUP during start-up (`systemctl reload` right after `start`) is kept: once serving,
/// Shellac reloads, so a policy file replaced after it was read is in force — the answer
/// says the new word — and the process serves on until SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_during_start_up_reloads_once_serving() {
    let dir = TempDir::new("early-hup");
    let config = slow_config(&dir.0, "one");
    let mut serving = Serving::start(&config);
    serving.wait_for("starting: reading the configuration");
    replace(&dir.0.join("policy.vcl"), &slow_vcl("two"));
    serving.signal("-HUP");
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
