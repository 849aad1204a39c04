//! `shellac log`: the transactions of `/log/stream`, one line each (or the JSON objects).

use std::io::{self, BufRead, Write};

use serde_json::Value;

use crate::client::AdminClient;

use super::text::{duration_us, human_bytes};

/// One `shellac log` line from a `/log/stream` object; None for the greeting.
pub fn render_log_line(v: &Value) -> Option<String> {
    if v.get("streaming").is_some() {
        return None;
    }
    if let Some(n) = v.get("dropped") {
        return Some(format!(
            "-- {n} transactions dropped: this reader was too slow --"
        ));
    }
    let time = v["time"].as_str().unwrap_or("");
    // 2000-10-10T13:55:36.123Z → 13:55:36.123
    let clock = time.get(11..23).unwrap_or(time);
    let decision = match v["reason"].as_str() {
        Some(r) => format!("{}({r})", v["cache"].as_str().unwrap_or("?")),
        None => v["cache"].as_str().unwrap_or("?").to_string(),
    };
    Some(format!(
        "{clock} {} {} {}{} {} {decision} backend={}{} ttfb={} time={} {}{}{}",
        v["client"].as_str().unwrap_or("-"),
        v["method"].as_str().unwrap_or("-"),
        v["host"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map_or(String::new(), |h| h.to_string()),
        v["url"].as_str().unwrap_or("-"),
        v["status"],
        v["backend"].as_str().unwrap_or("-"),
        v["site"]
            .as_str()
            .map_or(String::new(), |s| format!(" site={s}")),
        duration_us(&v["ttfb_us"]),
        duration_us(&v["duration_us"]),
        human_bytes(v["bytes"].as_u64().unwrap_or(0)),
        if v["complete"].as_bool() == Some(false) {
            " (incomplete)"
        } else {
            ""
        },
        match v["vcl"].as_str() {
            Some(t) => format!(" vcl=[{t}]"),
            None => String::new(),
        }
    ))
}

/// `shellac log`: prints transactions as they finish until interrupted or the server closes.
/// `--json` prints the objects as received.
pub fn log(client: &AdminClient, query: &str, raw_json: bool) -> io::Result<()> {
    let (status, reader) = client.open("GET", &format!("/log/stream?{query}"))?;
    if status != 200 {
        let mut body = String::new();
        let mut reader = reader;
        let _ = io::Read::read_to_string(&mut reader, &mut body);
        return Err(io::Error::other(format!(
            "status {status}: {}",
            body.trim()
        )));
    }
    let mut stdout = io::stdout().lock();
    for line in reader.lines() {
        let line = line?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if raw_json {
            if v.get("streaming").is_none() {
                writeln!(stdout, "{line}")?;
            }
        } else if let Some(text) = render_log_line(&v) {
            writeln!(stdout, "{text}")?;
        }
        stdout.flush()?;
    }
    Ok(())
}
