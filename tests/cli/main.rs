//! The `shellac` binary: `check` on good and bad files, `serve` end to end with SIGTERM;
//! `admin`: the tools that talk to a running instance find its admin listener;
//! `check_online`: `check --online` against real servers; `check_sites`: `check` on `[[site]]`
//! mistakes; `signals`: signals that come early.

#[path = "../common/mod.rs"]
mod common;

mod admin;
mod check_online;
mod check_sites;
mod signals;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::binary::{BIN, Lines, Served, run as shellac};
use common::*;

/// Every file under examples/, sub-folders (examples/rules/) included, passes `check`.
#[test]
fn check_accepts_every_example() {
    let mut folders = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples"
    ))];
    let mut n = 0;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "toml" || e == "vcl") {
                // The examples are meant for other machines (listeners.toml names 10.0.0.5).
                let (code, out, err) = shellac(&["check", "--file-only", path.to_str().unwrap()]);
                assert_eq!(code, 0, "{}: {out}{err}", path.display());
                assert!(out.contains("OK"), "{out}");
                n += 1;
            }
        }
    }
    assert!(n >= 18, "only {n} examples found");
}

/// The `shellac check ... examples/FILE` line an example's comments give passes as written, run
/// from the checkout's root on a machine that has none of the example's paths (sites.toml,
/// static-site.toml and wordpress-fpm.toml said `shellac check FILE`, which refused their
/// missing document roots: they now say `--file-only`).
#[test]
fn the_check_command_each_example_gives_passes_as_written() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut n = 0;
    for entry in std::fs::read_dir(format!("{root}/examples")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines().filter(|l| l.starts_with('#')) {
            let Some(command) = line.split("shellac check ").nth(1) else {
                continue;
            };
            let args: Vec<&str> = command
                .split_whitespace()
                .take_while(|w| !w.starts_with('('))
                .collect();
            if !args.last().is_some_and(|f| f.starts_with("examples/")) {
                continue; // another machine's path (tls.toml: /etc/shellac/tls.toml)
            }
            let out = Command::new(BIN)
                .current_dir(root)
                .arg("check")
                .args(&args)
                .output()
                .expect("run shellac");
            let said = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            // Without --file-only the machine is checked too: on a developer's machine another
            // program may hold the example's port (full.toml: 6081), which is its to say.
            let only_ports_held = said
                .lines()
                .filter(|l| l.starts_with("error:"))
                .all(|l| l.contains("is held by another process"));
            assert!(
                out.status.success() || (!args.contains(&"--file-only") && only_ports_held),
                "{}: `{line}`: {said}",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n >= 5, "only {n} example commands found");
}

#[test]
fn check_reports_file_line_key_and_problem_for_every_error() {
    let dir = std::env::temp_dir().join(format!("shellac-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[server]\nlisten = [\"127.0.0.1:6081\"]\nidle_timout = \"5s\"\n\n[cache]\nmemory_size = \"lots\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = 8080\n",
    )
    .unwrap();
    let (code, _, err) = shellac(&["check", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    let file = bad.display().to_string();
    assert!(
        err.contains(&format!(
            "{file}:3:1: `server.idle_timout`: unknown key `idle_timout` in [server]; did you mean `idle_timeout`?"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{file}:6:15: `cache.memory_size`:")),
        "{err}"
    );
    assert!(err.contains("2 errors"), "{err}");

    std::fs::write(&bad, "[cache]\nmemory_size = \"1MiB\"\nmax_object_size = \"8MiB\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = 0\n").unwrap();
    let (code, _, err) = shellac(&["check", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "{file}:3:1: `cache.max_object_size`: 8 MiB is larger than cache.memory_size (1 MiB)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{file}:7:1: `backend.0.port`: must be between 1 and 65535"
        )),
        "{err}"
    );

    let (code, _, err) = shellac(&["check", "/nonexistent/shellac.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read config file"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn help_reads_well() {
    let (code, out, _) = shellac(&["--help"]);
    assert_eq!(code, 0);
    for word in [
        "serve",
        "demo",
        "check",
        "stats",
        "stat",
        "top",
        "log",
        "reload",
        "inspect",
        "Quick start",
    ] {
        assert!(out.contains(word), "{word} missing from --help:\n{out}");
    }
    // The list of commands is one short line each (a summary; the details are in
    // `shellac help COMMAND`), and every command's own help works.
    let commands: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(commands.len() > 10, "{out}");
    for line in &commands {
        assert!(
            line.len() <= 110,
            "a command's summary in --help longer than a line ({}):\n{line}",
            line.len()
        );
        let name = line.split_whitespace().next().unwrap_or_default();
        let (code, help, err) = shellac(&["help", name]);
        assert_eq!(code, 0, "shellac help {name}: {err}");
        assert!(
            help.contains("Usage: shellac"),
            "shellac help {name}:\n{help}"
        );
    }
    let (_, check, _) = shellac(&["help", "check"]);
    assert!(check.contains("file:line:column"), "{check}");
    let (code, out, _) = shellac(&["serve", "--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--config",
        "--listen",
        "--backend",
        "--admin",
        "--cache-size",
    ] {
        assert!(out.contains(flag), "{flag} missing:\n{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_binary_caches_and_stops_on_sigterm() {
    let origin = Origin::start(|_| Reply::ok("from origin").cc("max-age=60")).await;
    let backend = origin.addr.to_string();
    let child = Served::serve(&[
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--backend",
        &backend,
        "--cache-size",
        "16MiB",
    ]);
    let (proxy, admin) = (child.proxy, child.admin);
    assert!(get(proxy, "/").await.cache_status().contains("fwd=miss"));
    let hit = get(proxy, "/").await;
    assert_eq!(hit.text(), "from origin");
    assert!(hit.cache_status().contains("hit"));
    let stats = get(admin, "/stats").await.text();
    assert!(stats.contains("\"cache_hit\": 1"), "{stats}");
    assert!(
        stats.contains("\"cache_capacity_bytes\": 16777216"),
        "{stats}"
    );

    child.stop();
}

/// `shellac check -c FILE` (as `serve -c FILE` is written) checks the file as `check FILE`
/// does; with no file at all, clap says one is needed.
#[test]
fn check_takes_the_file_as_serve_does() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/minimal.toml");
    let (code, out, err) = shellac(&["check", "--file-only", "-c", file]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("OK"), "{out}");
    let (code, _, err) = shellac(&["check", "--file-only", "--config", file]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = shellac(&["check"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("FILE"), "{err}");
}

/// Regression: `shellac check FILE | head -1` panicked with "failed printing to stdout".
#[test]
fn closed_stdout_is_not_a_panic() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(BIN)
        .args([
            "check",
            concat!(env!("CARGO_MANIFEST_DIR"), "/examples/full.toml"),
        ])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_log_to_stdout() {
    let origin = Origin::start(|_| Reply::ok("from origin").cc("max-age=60")).await;
    let dir = temp_dir("cli-stdout");
    let config = dir.join("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[log]\naccess_log = \"stdout\"\nformat = \"%m %U %s %{{cache}}x\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            origin.addr.port()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--config", config.to_str().unwrap()])
        .stdout(Stdio::piped());
    let mut child = Served::start(cmd);
    let stdout = child.take_stdout().expect("piped stdout");
    get(child.proxy, "/out").await;
    get(child.proxy, "/out").await;
    // SIGTERM flushes the log; stdout then ends.
    child.stop();
    let mut lines: Vec<String> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .collect();
    lines.sort();
    assert_eq!(lines, vec!["GET /out 200 hit", "GET /out 200 miss"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigusr1_reopens_the_access_log_and_sigterm_flushes_it() {
    let origin = Origin::start(|_| Reply::ok("from origin").cc("max-age=60")).await;
    let dir = temp_dir("cli-usr1");
    let log = dir.join("access.log");
    let config = dir.join("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[log]\naccess_log = \"{}\"\nformat = \"%U %s %{{cache}}x\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = {}\n",
            log.display(),
            origin.addr.port()
        ),
    )
    .unwrap();
    let child = Served::serve(&["--config", config.to_str().unwrap()]);
    let proxy = child.proxy;
    get(proxy, "/one").await;
    assert_eq!(wait_lines(&log, 1).await, vec!["/one 200 miss"]);
    let rotated = dir.join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    child.signal("-USR1");
    for _ in 0..200 {
        if log.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(log.exists(), "SIGUSR1 reopens (creates) the access log");
    get(proxy, "/two").await;
    get(proxy, "/two").await;
    child.stop();
    // SIGTERM drains and flushes: both records are there once the process has exited (in
    // either order: the two requests may have run on different workers).
    let mut lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(lines, vec!["/two 200 hit", "/two 200 miss"]);
    assert_eq!(
        std::fs::read_to_string(&rotated).unwrap(),
        "/one 200 miss\n"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_and_reload_command_swap_the_config() {
    let a = Origin::start(|_| Reply::ok("A").cc("max-age=60")).await;
    let b = Origin::start(|_| Reply::ok("B").cc("max-age=60")).await;
    let dir = temp_dir("cli-reload");
    let config = dir.join("shellac.toml");
    let text = |port: u16, extra: &str| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n{extra}\n[[backend]]\nhost = \"127.0.0.1\"\nport = {port}\n"
        )
    };
    std::fs::write(&config, text(a.addr.port(), "")).unwrap();
    let child = Served::serve(&["--config", config.to_str().unwrap()]);
    let (proxy, admin) = (child.proxy, child.admin);
    assert_eq!(get(proxy, "/1").await.text(), "A");

    // SIGHUP: the next miss goes to B (bounded wait for the signal to be handled).
    std::fs::write(&config, text(b.addr.port(), "")).unwrap();
    child.signal("-HUP");
    let mut got = String::new();
    for i in 0..100 {
        got = get(proxy, &format!("/hup{i}")).await.text();
        if got == "B" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(got, "B");

    // `shellac reload`: a good file prints what changed...
    std::fs::write(&config, text(a.addr.port(), "")).unwrap();
    let admin_arg = admin.to_string();
    let (code, out, err) = shellac(&["reload", "--admin", &admin_arg]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("reloaded: configuration generation 3"),
        "{out}"
    );
    assert!(out.contains("backend backend0: new"), "{out}");
    assert_eq!(get(proxy, "/2").await.text(), "A");
    // ...a bad one prints every error and exits 1, and the old config runs on.
    std::fs::write(
        &config,
        text(b.addr.port(), "threads = \"many\"\nbogus = 1"),
    )
    .unwrap();
    let (code, _, err) = shellac(&["reload", "--admin", &admin_arg]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("reload rejected; still running configuration generation 3"),
        "{err}"
    );
    assert!(err.contains("`server.threads`"), "{err}");
    assert!(err.contains("`server.bogus`"), "{err}");
    assert_eq!(get(proxy, "/3").await.text(), "A");
    child.stop();
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_top_and_log_against_a_running_proxy() {
    let origin = Origin::start(|s| match s.path.as_str() {
        "/err" => Reply::ok("down").status(503),
        _ => Reply::ok("hello").cc("max-age=60"),
    })
    .await;
    let backend = origin.addr.to_string();
    let child = Served::serve(&[
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--backend",
        &backend,
    ]);
    let (proxy, admin) = (child.proxy, child.admin);
    let admin_arg = admin.to_string();
    // Ask for rankings first, so transactions are collected from now on.
    get(admin, "/top").await;
    get(proxy, "/a").await;
    get(proxy, "/a").await;
    get(proxy, "/b").await;

    let (code, out, err) = shellac(&["stat", "-1", "--admin", &admin_arg]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Uptime 0d+00:00:"), "{out}");
    // Regression (issue 23, defect 6): `shellac stat -1 | head -2` printed
    // `Broken pipe (os error 32)` and failed.
    for args in [
        &["stat", "-1", "--all", "--admin", &admin_arg][..],
        &["top", "-1", "--admin", &admin_arg][..],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let closed = Command::new(BIN)
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&closed.stderr);
        assert_eq!(closed.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
    assert!(out.contains("Hit ratio: 10s  33.3%"), "{out}");
    assert!(out.contains("TTFB (10s): p50 "), "{out}");
    let req = out
        .lines()
        .find(|l| l.starts_with("client_req "))
        .expect("client_req row");
    assert!(req.split_whitespace().nth(1) == Some("3"), "{req}");
    assert!(
        !out.contains("cache_expired"),
        "zero counters are hidden: {out}"
    );

    let mut top = String::new();
    for _ in 0..100 {
        let (code, out, err) = shellac(&["top", "-1", "--admin", &admin_arg, "-n", "5"]);
        assert_eq!(code, 0, "{err}");
        top = out;
        if top.contains("test.example/b") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        top.starts_with("Top url by requests over the last 60 s\n"),
        "{top}"
    );
    let rows: Vec<Vec<&str>> = top
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], vec!["2", "1", "10B", "test.example/a"], "{top}");
    assert_eq!(rows[1], vec!["1", "1", "5B", "test.example/b"], "{top}");

    // `shellac log --status 5xx` prints the 503 and nothing else.
    let log = Lines::spawn(&["log", "--admin", &admin_arg, "--status", "5xx"]);
    let mut subscribed = false;
    for _ in 0..200 {
        let stats = get(admin, "/stats").await.text();
        if stats.contains("\"log_subscribers\": 1") {
            subscribed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(subscribed);
    get(proxy, "/a").await;
    get(proxy, "/err").await;
    let line = log.next().expect("shellac log prints the 503");
    drop(log);
    assert!(
        line.contains(" 127.0.0.1 GET test.example/err 503 pass(status) backend=default "),
        "{line}"
    );
    let (code, _, err) = shellac(&["log", "--admin", &admin_arg, "--url", "("]);
    assert_eq!(code, 2);
    assert!(err.contains("--url"), "{err}");
    // A backend nobody has: said at once (it used to stream nothing, for ever).
    let (code, _, err) = shellac(&["log", "--admin", &admin_arg, "--backend", "nope"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("status 404: backend: no backend or director named `nope`"),
        "{err}"
    );
    child.stop();
}
