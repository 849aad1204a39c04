//! `shellac check` against `shellac serve`: it refuses every file serve would refuse to start
//! with, tells a port held by the running Shellac from one held by another process, accepts
//! a full TOML file, and reports file and machine errors together.

use super::*;

/// Issue 23 #2: for each thing `serve` refuses at start-up, `check` refuses too, naming the
/// key (it said OK, then `serve` exited: an access log in a missing directory, the admin
/// address equal to a listen address, ...).
#[test]
fn check_refuses_what_serve_refuses() {
    let dir = TempDir::new("check-refuses");
    let d = dir.0.display().to_string();
    std::fs::create_dir_all(dir.0.join("a-directory")).unwrap();
    let port = free_port();
    let backend = "\n[[backend]]\nhost = \"127.0.0.1\"\nport = 9\n";
    let disk = |path: &str, size: &str| {
        format!("[storage.disk]\npath = \"{path}\"\nsize = \"{size}\"\nregion_size = \"1GiB\"\n")
    };
    let server = "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n";
    let cases: Vec<(&str, String)> = vec![
        (
            "log.access_log",
            format!("{server}[log]\naccess_log = \"{d}/missing/access.log\"\n"),
        ),
        (
            "log.access_log",
            format!("{server}[log]\naccess_log = \"{d}/a-directory\"\n"),
        ),
        (
            "server.admin",
            format!("[server]\nlisten = [\"127.0.0.1:{port}\"]\nadmin = \"127.0.0.1:{port}\"\n"),
        ),
        (
            "server.listen.1",
            format!(
                "[server]\nlisten = [\"0.0.0.0:{port}\", \"127.0.0.1:{port}\"]\nadmin = \"127.0.0.1:0\"\n"
            ),
        ),
        (
            "server.listen.0",
            "[server]\nlisten = [\"192.0.2.1:0\"]\nadmin = \"127.0.0.1:0\"\n".to_string(),
        ),
        (
            "server.admin",
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"192.0.2.1:0\"\n".to_string(),
        ),
        (
            "storage.disk.path",
            format!(
                "{server}{}",
                disk(&format!("{d}/missing/cache.dat"), "4GiB")
            ),
        ),
        (
            "storage.disk.path",
            format!("{server}{}", disk("/sys/shellac-cache.dat", "4GiB")),
        ),
        (
            "storage.disk.path",
            format!("{server}{}", disk(&format!("{d}/a-directory"), "4GiB")),
        ),
        (
            "storage.disk.size",
            format!("{server}{}", disk(&format!("{d}/cache.dat"), "64TiB")),
        ),
        ("server.threads", format!("{server}threads = \"many\"\n")),
    ];
    for (key, text) in cases {
        let config = write_config(&dir.0, &format!("{text}{backend}"));
        let (code, out, err) = shellac(&["check", config.to_str().unwrap()]);
        assert_eq!(
            code, 1,
            "check accepted what serve refuses ({key}):\n{text}\n{out}{err}"
        );
        assert!(err.contains(&format!("`{key}`")), "{key}:\n{err}");
        let (code, log) = Serving::start(&config).exit();
        assert_ne!(code, Some(0), "serve started with:\n{text}\n{log}");
        assert!(!log.contains("serving:"), "{log}");
        // serve says what check says, but for the free space it saw: other processes write
        // to the same disk between the two runs ("33.4 GiB available", then "33.5 GiB").
        let first = err.lines().next().unwrap_or_default();
        let first = first
            .find(" needed, ")
            .map_or(first, |at| &first[..at + " needed".len()]);
        assert!(log.contains(first), "check: {first}\nserve: {log}");
        assert!(
            !dir.0.join("cache.dat").exists(),
            "check and serve left a data file"
        );
    }
}

/// Issue 32: `check` passed a configuration whose port another process holds, while README says
/// a file `check` accepts does not stop `serve`. A port held by the running Shellac this file
/// is for is fine (a warning); held by another process or another Shellac, it is an error.
#[test]
fn check_tells_a_port_held_by_the_running_shellac_from_one_held_by_another_process() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let dir = TempDir::new("check-in-use");
    let config = write_config(
        &dir.0,
        &format!(
            "[server]\nlisten = [\"{addr}\"]\nadmin = \"off\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = 9\n"
        ),
    );
    let (code, out, err) = shellac(&["check", config.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!(
            "error: {}:2:11: `server.listen.0`: {addr} is held by another process (pid {}",
            config.display(),
            std::process::id()
        )),
        "{err}"
    );
    let (code, log) = Serving::start(&config).exit();
    assert_ne!(code, Some(0), "{log}");
    // serve says what check says, before it starts.
    assert!(
        log.contains(&format!("{addr} is held by another process")),
        "{log}"
    );
    drop(held);

    // The running Shellac started with this very file holds its ports: fine.
    let port = |_| {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (listen, admin) = (port(0), port(1));
    let text = format!(
        "[server]\nlisten = [\"{listen}\"]\nadmin = \"{admin}\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = 9\n"
    );
    let first = dir.0.join("first.toml");
    std::fs::write(&first, &text).unwrap();
    let running = common::binary::Served::serve(&["--config", first.to_str().unwrap()]);
    let (code, out, err) = shellac(&["check", first.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(&format!("warning: {}:2:", first.display()))
            && err.contains(&format!(
                "{listen} is held by the running Shellac this file is for (pid {})",
                running.pid()
            )),
        "{err}"
    );
    // Another file with the same ports: held by another Shellac, an error.
    let second = dir.0.join("second.toml");
    std::fs::write(&second, &text).unwrap();
    let (code, _, err) = shellac(&["check", second.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "{listen} is held by another Shellac (pid {}, running {})",
            running.pid(),
            first.display()
        )),
        "{err}"
    );
    running.stop();
}

/// Issue 23 #17: examples/full.toml (every setting, generated from the definitions) is a
/// valid configuration for this machine too: `shellac check` says OK (a port in use now would
/// only be a warning).
#[test]
fn check_accepts_full_toml() {
    let full = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/full.toml");
    let (code, out, err) = shellac(&["check", full]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("examples/full.toml: OK"), "{out}");
    assert!(!err.contains("error"), "{err}");
}

/// `check` asks the machine about a file read as written even when checks across its settings
/// failed: every error in one run.
#[test]
fn check_reports_file_and_machine_errors_together() {
    let dir = TempDir::new("check-together");
    let config = write_config(
        &dir.0,
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"off\"\nmax_headers = 0\n\n[log]\naccess_log = \"{}/missing/access.log\"\n\n[[backend]]\nhost = \"127.0.0.1\"\nport = 9\n",
            dir.0.display()
        ),
    );
    let (code, out, err) = shellac(&["check", config.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(":4:1: `server.max_headers`: must be between 1 and 10000"),
        "{err}"
    );
    assert!(
        err.contains(":7:1: `log.access_log`: cannot create"),
        "{err}"
    );
    assert!(err.contains("2 errors"), "{err}");
}
