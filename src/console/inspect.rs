//! `shellac inspect`: what is cached for a URL (`GET /cache`): each variant, each tier.

use std::fmt::Write as _;
use std::io::{self, Write};

use serde_json::Value;

use crate::client::AdminClient;

use super::text::{encode, human_bytes};

/// `shellac inspect` text from a `GET /cache` answer: one block per variant, one line per
/// tier holding it.
pub fn render_inspect(v: &Value) -> String {
    let mut out = String::new();
    let vary: Vec<&str> = v["vary"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let _ = write!(out, "{}", v["key"]["url"].as_str().unwrap_or("?"));
    if !vary.is_empty() {
        let _ = write!(out, "  (vary: {})", vary.join(", "));
    }
    if v["hit_for_miss"].as_bool() == Some(true) {
        out.push_str("  [hit-for-miss: requests pass]");
    }
    if v["shared"].as_str() == Some("unreachable") {
        out.push_str("  [shared tier: Redis unreachable, not shown]");
    }
    out.push('\n');
    let variants = v["variants"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if variants.is_empty() {
        out.push_str("  not cached\n");
    }
    let secs = |x: &Value| x.as_u64().map_or("-".to_string(), |s| format!("{s}s"));
    for var in variants {
        let selection: Vec<String> = var["selection"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, value)| format!("{name}={}", value.as_str().unwrap_or("(absent)")))
            .collect();
        let _ = writeln!(
            out,
            "variant {}{}{}",
            var["variant"].as_str().unwrap_or("?"),
            if selection.is_empty() { "" } else { "  " },
            selection.join("  ")
        );
        for c in var["copies"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "  {:<6} {} {:<7} {} (headers {} + body {}, body in {})  age {}  ttl {} ({} left)",
                c["tier"].as_str().unwrap_or("?"),
                c["status"],
                c["state"].as_str().unwrap_or("?"),
                human_bytes(c["size_bytes"].as_u64().unwrap_or(0)),
                c["header_bytes"],
                c["body_bytes"],
                c["body_in"].as_str().unwrap_or("?"),
                secs(&c["age_seconds"]),
                secs(&c["ttl_seconds"]),
                secs(&c["ttl_left_seconds"]),
            );
            let _ = writeln!(
                out,
                "         grace left {}  keep left {}  stale-if-error left {}  hit in memory {}{}",
                secs(&c["grace_left_seconds"]),
                secs(&c["keep_left_seconds"]),
                secs(&c["stale_if_error_left_seconds"]),
                if c["hit_in_memory"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "no"
                },
                if c["banned"].as_bool() == Some(true) {
                    "  BANNED (dropped at next lookup)"
                } else {
                    ""
                },
            );
            let tags: Vec<&str> = c["tags"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut extra = Vec::new();
            if !tags.is_empty() {
                extra.push(format!("tags: {}", tags.join(" ")));
            }
            if let Some(e) = c["etag"].as_str() {
                extra.push(format!("etag: {e}"));
            }
            if let Some(lm) = c["last_modified"].as_str() {
                extra.push(format!("last-modified: {lm}"));
            }
            if !extra.is_empty() {
                let _ = writeln!(out, "         {}", extra.join("  "));
            }
        }
    }
    out
}

/// `shellac inspect`: prints what is cached for `url` (text, or the JSON as received).
/// Ok(false) when nothing is cached (the CLI exits 1, for scripts).
pub fn inspect(
    client: &AdminClient,
    url: &str,
    host: Option<&str>,
    raw_json: bool,
) -> io::Result<bool> {
    if host.is_none() && url.starts_with('/') {
        // The admin API's words are `host=HOST`; the command's are `--host`.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a path needs --host HOST (the Host the requests carry): `shellac inspect {url} --host www.example.com`, or the whole URL: `shellac inspect http://www.example.com{url}`"
            ),
        ));
    }
    let mut path = format!("/cache?url={}", encode(url));
    if let Some(h) = host {
        let _ = write!(path, "&host={}", encode(h));
    }
    let resp = client.request("GET", &path)?;
    let value: Value = serde_json::from_str(&resp.body).map_err(|_| {
        io::Error::other(format!(
            "GET /cache: status {}: {}",
            resp.status,
            resp.body.trim()
        ))
    })?;
    if resp.status != 200 && resp.status != 404 {
        return Err(io::Error::other(
            value["error"]
                .as_str()
                .unwrap_or(resp.body.trim())
                .to_string(),
        ));
    }
    let text = if raw_json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )
    } else {
        render_inspect(&value)
    };
    let mut stdout = io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = stdout.write_all(text.as_bytes());
    Ok(resp.status == 200)
}
