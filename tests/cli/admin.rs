//! Issue 32, "a new operator's first hour": the CLI tools (`stats`, `stat`, `top`, `log`,
//! `inspect`, `reload`, `ban`, `purge`) find the admin listener from `--config FILE` or
//! `$SHELLAC_ADMIN`, and when they cannot reach it they say how to point them.

use std::process::Command;

use crate::common::binary::{BIN, Served, output};
use crate::common::{free_port, refused_port};

/// `shellac ARGS` with `env` set and the admin-finding variables of the test's own
/// environment removed: (exit code, stdout, stderr).
fn shellac(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    output(
        Command::new(BIN)
            .args(args)
            .env_remove("SHELLAC_ADMIN_TOKEN")
            .env_remove("SHELLAC_ADMIN")
            .envs(env.iter().copied()),
    )
}

#[test]
fn cli_tools_find_the_admin_address_from_config_or_shellac_admin() {
    let dir = std::env::temp_dir().join(format!("shellac-cli-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("shellac.toml");
    let path = file.to_str().unwrap();
    // The admin port is free when chosen (bound and released), but another test's connection
    // can take it as its local port before shellac binds it: shellac then exits, and another
    // port is tried (at most 5).
    let mut tries = Vec::new();
    let (child, admin) = loop {
        let admin = format!("127.0.0.1:{}", free_port());
        std::fs::write(
            &file,
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"{admin}\"\nadmin_token = \"s3cret-token\"\n[[backend]]\nhost = \"127.0.0.1\"\nport = 9\n"
            ),
        )
        .unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--config", path]);
        match Served::try_start(cmd) {
            Ok(child) => break (child, admin),
            Err(log) if tries.len() < 4 => tries.push(log),
            Err(log) => panic!("shellac did not start on 5 admin ports: {tries:?}\n{log}"),
        }
    };
    assert_eq!(child.admin.to_string(), admin);

    // --config FILE: its server.admin and its admin_token.
    for args in [
        &["stats", "--config", path][..],
        &["stat", "-1", "-c", path][..],
        &["top", "-1", "-c", path][..],
        &["reload", "-c", path][..],
        &["ban", "-c", path, "req.url ~ ^/nothing"][..],
        &["purge", "-c", path, "http://x.example/nothing"][..],
    ] {
        let (code, out, err) = shellac(args, &[]);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
    let (code, out, _) = shellac(&["inspect", "-c", path, "http://x.example/"], &[]);
    assert_eq!(code, 1, "nothing cached: {out}");
    // $SHELLAC_ADMIN (with the token from its own variable).
    let (code, out, err) = shellac(
        &["stats"],
        &[
            ("SHELLAC_ADMIN", &admin),
            ("SHELLAC_ADMIN_TOKEN", "s3cret-token"),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("cache_capacity_bytes"), "{out}");
    // --admin beats both.
    let (code, _, err) = shellac(
        &["stats", "--admin", "127.0.0.1:1", "-c", path],
        &[("SHELLAC_ADMIN", &admin)],
    );
    assert_eq!(code, 1);
    assert!(err.contains("the address is --admin 127.0.0.1:1"), "{err}");
    child.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_connection_error_says_how_to_point_the_cli_tools() {
    let closed = format!("127.0.0.1:{}", refused_port());
    for args in [
        &["stats"][..],
        &["stat", "-1"][..],
        &["top", "-1"][..],
        &["reload"][..],
        &["ban", "req.url ~ ^/"][..],
        &["purge", "http://x.example/"][..],
        &["inspect", "http://x.example/"][..],
        &["log"][..],
    ] {
        let (code, _, err) = shellac(args, &[("SHELLAC_ADMIN", &closed)]);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains(&format!("cannot reach the admin listener at {closed}")),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!("the address is $SHELLAC_ADMIN={closed}"))
                && err.contains("--admin ADDR:PORT, --config FILE")
                && err.contains("SHELLAC_ADMIN=ADDR:PORT"),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = shellac(&["stats"], &[("SHELLAC_ADMIN", "localhost")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("SHELLAC_ADMIN=\"localhost\" is not an address"),
        "{err}"
    );
    let off = std::env::temp_dir().join(format!("shellac-admin-off-{}.toml", std::process::id()));
    std::fs::write(
        &off,
        "[server]\nadmin = \"off\"\n[[backend]]\nhost = \"a\"\n",
    )
    .unwrap();
    let (code, _, err) = shellac(&["stat", "-1", "-c", off.to_str().unwrap()], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("server.admin is off"), "{err}");
    let _ = std::fs::remove_file(&off);
}

#[test]
fn inspect_a_path_says_the_host_flag_not_host_equals() {
    let (code, _, err) = shellac(&["inspect", "/news/"], &[("SHELLAC_ADMIN", "127.0.0.1:1")]);
    assert_eq!(code, 1);
    assert!(err.contains("a path needs --host HOST"), "{err}");
    assert!(!err.contains("host=HOST"), "{err}");
}

/// Sends one request to `addr` and reads the answer to the end (`Connection: close`).
fn request(addr: std::net::SocketAddr) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /before-top HTTP/1.1\r\nHost: quiet.example\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(answer.starts_with(b"HTTP/1.1 "), "{answer:?}");
}

/// Issue 32: `shellac top -1` printed only a header on its first call (nothing was being
/// collected before it asked). Its last line counts every request of the window from the
/// counters (which run whether anybody watches), and a line says why the ranking is empty.
#[test]
fn top_once_on_its_first_call_shows_the_windows_totals_and_says_why_the_ranking_is_empty() {
    let child = Served::serve(&["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"]);
    let admin = child.admin.to_string();
    // A quiet proxy: nothing at all yet.
    let (code, out, err) = shellac(&["top", "-1", "--admin", &admin], &[]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let totals: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(totals[..4], ["0", "0", "0B", "(all"], "{out}");
    assert!(
        lines[3].starts_with(
            "(rankings are collected only while `shellac top` or the dashboard watches"
        ) && lines[3].contains("no requests at all in the last"),
        "{out}"
    );
    // Requests made before anybody watched: not in the ranking (collecting was on for the
    // first call's minute, so stop it: a fresh process), but counted on the totals line.
    child.stop();
    let child = Served::serve(&["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"]);
    let admin = child.admin.to_string();
    request(child.proxy);
    request(child.proxy);
    let (code, out, err) = shellac(&["top", "-1", "--admin", &admin], &[]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let totals: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        totals[..2],
        ["2", "2"],
        "two requests, neither from the cache: {out}"
    );
    assert!(lines[2].contains("(all requests, last "), "{out}");
    assert!(
        lines[3].contains("the last line counts every request of the window"),
        "{out}"
    );
    // Issue 32: `shellac stats` opened with 14 acme_* zeros. Counters are grouped by area,
    // zeros counted on the last line (`--all` shows them).
    let (code, out, err) = shellac(&["stats", "--admin", &admin], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.lines().next().unwrap_or("").starts_with("acme_"),
        "{out}"
    );
    assert!(!out.lines().any(|l| l.starts_with("acme_")), "{out}");
    let last = out.lines().last().unwrap_or("");
    assert!(
        last.starts_with('(') && last.contains("acme_* 14") && last.contains("--all"),
        "{out}"
    );
    let (_, all, _) = shellac(&["stats", "--all", "--admin", &admin], &[]);
    assert!(all.lines().any(|l| l.starts_with("acme_order ")), "{all}");
    child.stop();
}
