//! FastCGI's error stream end to end: what PHP logs with `error_log()` (php-fpm sends it to
//! the web server in FCGI_STDERR records, `fastcgi.logging`) reaches the log of the real
//! `shellac serve`, naming the backend, at most 4 KiB per request and then one line saying the
//! rest was not logged.

use std::sync::mpsc::Receiver;
use std::time::Duration;

use super::common::binary::Served;
use super::common::*;
use super::fpm;

/// Log lines until one contains `marker` (at most 20 s away): the lines before it.
fn lines_until(log: &Receiver<String>, marker: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let line = log
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no log line with {marker:?} after {seen:#?}"));
        if line.contains(marker) {
            seen.push(line);
            return seen;
        }
        seen.push(line);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_error_output_reaches_the_log_up_to_its_bound() {
    let Some(fpm) = fpm() else { return };
    let dir = TempDir::new("fcgi-stderr");
    let config = dir.path("shellac.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[[backend]]\nname = \"php\"\nprotocol = \"fastcgi\"\nhost = \"127.0.0.1\"\nport = {}\nroot = \"{}\"\nmax_connections = {}\n",
            fpm.tcp.port(),
            fpm.root.display(),
            super::CHILDREN
        ),
    )
    .unwrap();
    let served = Served::serve(&["--config", config.to_str().unwrap()]);
    // A message that fits: logged whole, as a warning naming the backend.
    let r = get(served.proxy, "/stderr.php?n=1").await;
    assert_eq!((r.status, r.text().as_str()), (200, "logged 1"));
    let lines = lines_until(&served.log, "stderr-fixture 0 ");
    let line = lines.last().unwrap();
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("backend=php"), "{line}");
    assert!(
        line.contains("FastCGI stderr: PHP message: stderr-fixture 0 eee"),
        "{line}"
    );
    // Twelve messages of ~530 bytes (php-fpm joins them, "; PHP message: ..."): the first
    // 4 KiB are logged, then one line says the rest was not; the last messages never reach
    // the log.
    let r = get(served.proxy, "/stderr.php?n=12").await;
    assert_eq!((r.status, r.text().as_str()), (200, "logged 12"));
    let lines = lines_until(&served.log, "more output not logged");
    let logged: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split("FastCGI stderr: ").nth(1))
        .filter(|t| !t.starts_with("more output not logged"))
        .map(|t| t.trim_end_matches(" backend=php"))
        .collect();
    let text = logged.concat();
    assert!(
        text.starts_with("PHP message: stderr-fixture 0 "),
        "{lines:#?}"
    );
    let messages = text.matches("stderr-fixture ").count();
    assert!(
        (6..=8).contains(&messages),
        "{messages} messages: {lines:#?}"
    );
    assert!(
        text.len() > 3000 && text.len() <= 4096,
        "{} bytes of error output logged",
        text.len()
    );
    // The next request's first message follows: nothing of the first request's rest
    // (messages 8 to 11) was logged in between.
    let r = get(served.proxy, "/stderr.php?n=1&after=1").await;
    assert_eq!(r.status, 200);
    let lines = lines_until(&served.log, "stderr-fixture 0 ");
    for l in &lines {
        for late in [
            "stderr-fixture 9 ",
            "stderr-fixture 10 ",
            "stderr-fixture 11 ",
        ] {
            assert!(!l.contains(late), "logged past the bound: {l}");
        }
    }
    served.stop();
}
