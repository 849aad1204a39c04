//! The commands that talk to a running Shellac over its admin listener: `stats`, `stat`,
//! `top`, `log`, `inspect`, `ban`, `purge`, `backend`, `reload`, `upgrade`.

use std::process::ExitCode;

use anyhow::{Context, bail};

use shellac::client::AdminClient;
use shellac::console;

use super::args::unreachable_hint;

/// The query of `shellac top`'s `/top` request.
pub(super) fn top_query(
    by: &str,
    sort: &str,
    window: u64,
    rows: usize,
    site: Option<&str>,
) -> String {
    let mut query = format!(
        "by={}&sort={}&window={window}&n={rows}",
        console::encode(by),
        console::encode(sort)
    );
    if let Some(s) = site {
        query.push_str(&format!("&site={}", console::encode(s)));
    }
    query
}

/// The query of `shellac log`'s `/log/stream` request, or why `--url` is no regular
/// expression.
pub(super) fn log_query(
    url: Option<&str>,
    status: Option<&str>,
    miss: bool,
    backend: Option<&str>,
    site: Option<&str>,
    reason: Option<&str>,
) -> Result<String, regex::Error> {
    if let Some(re) = url {
        regex::Regex::new(re)?;
    }
    let mut query = Vec::new();
    if let Some(u) = url {
        query.push(format!("url={}", console::encode(u)));
    }
    if let Some(s) = status {
        query.push(format!("status={}", console::encode(s)));
    }
    if miss {
        query.push("miss=1".into());
    }
    if let Some(b) = backend {
        query.push(format!("backend={}", console::encode(b)));
    }
    if let Some(r) = reason {
        query.push(format!("reason={}", console::encode(r)));
    }
    if let Some(s) = site {
        query.push(format!("site={}", console::encode(s)));
    }
    Ok(query.join("&"))
}

/// Sends `body` to an admin POST endpoint and prints the JSON answer; fails on a non-2xx.
pub(super) fn admin_post(admin: &AdminClient, path: &str, body: &str) -> anyhow::Result<()> {
    let resp = admin.request_with_body("POST", path, body.as_bytes())?;
    let value: serde_json::Value =
        serde_json::from_str(&resp.body).context("admin listener did not return JSON")?;
    if !(200..300).contains(&resp.status) {
        bail!("{}", value["error"].as_str().unwrap_or(&resp.body));
    }
    say!(
        "{}",
        serde_json::to_string_pretty(&value).unwrap_or_default()
    );
    Ok(())
}

/// `shellac stats`: the counters grouped by area (the word before the first `_`: `client`,
/// `cache`, `backend`, ...; the areas in the order their first non-zero counter is declared),
/// a blank line between areas; zeros (mostly features not in use, such as `acme_*`) are left
/// out and counted on the last line unless `all`.
pub(super) fn stats(admin: &AdminClient, all: bool) -> anyhow::Result<()> {
    let map = admin.get_json("/stats")?;
    let map = map
        .as_object()
        .context("admin listener did not return an object")?;
    let width = map.keys().map(|k| k.len()).max().unwrap_or(0);
    let area = |k: &str| k.split('_').next().unwrap_or(k).to_string();
    let zero = |v: &serde_json::Value| v.as_f64() == Some(0.0);
    let mut areas: Vec<(String, Vec<(&String, &serde_json::Value)>)> = Vec::new();
    let mut zeros = Vec::new();
    for (k, v) in map {
        if zero(v) && !all {
            zeros.push(k.as_str());
            continue;
        }
        let a = area(k);
        match areas.iter_mut().find(|(name, _)| *name == a) {
            Some((_, rows)) => rows.push((k, v)),
            None => areas.push((a, vec![(k, v)])),
        }
    }
    for (i, (_, rows)) in areas.iter().enumerate() {
        if i > 0 {
            say!();
        }
        for (k, v) in rows {
            say!("{k:<width$}  {v}");
        }
    }
    if !zeros.is_empty() {
        let mut by_area: Vec<(String, usize)> = Vec::new();
        for k in &zeros {
            let a = area(k);
            match by_area.iter_mut().find(|(name, _)| *name == a) {
                Some((_, n)) => *n += 1,
                None => by_area.push((a, 1)),
            }
        }
        let list: Vec<String> = by_area.iter().map(|(a, n)| format!("{a}_* {n}")).collect();
        say!();
        say!(
            "({} counters are 0, not shown: {}; --all shows them)",
            zeros.len(),
            list.join(", ")
        );
    }
    // Per site (requests, cache use and share): the table `shellac stat` shows.
    if let Ok(sites) = admin.get_json("/sites") {
        let table = shellac::console::render_sites_table(&sites);
        if !table.is_empty() {
            say!("{}", table.trim_end());
        }
    }
    Ok(())
}

/// `shellac upgrade`: POST /upgrade, the old and new process ids, or why not.
pub(super) fn upgrade(admin: &AdminClient) -> anyhow::Result<()> {
    let resp = admin.request("POST", "/upgrade")?;
    let v: serde_json::Value = serde_json::from_str(&resp.body).unwrap_or_default();
    if resp.status != 200 {
        bail!(
            "upgrade failed, the running process serves on: {}",
            v["error"].as_str().unwrap_or(resp.body.trim())
        );
    }
    say!(
        "upgraded: pid {} → pid {} ({})",
        v["old_pid"],
        v["new_pid"],
        v["binary"].as_str().unwrap_or_default()
    );
    Ok(())
}

pub(super) fn reload(admin: &AdminClient) -> ExitCode {
    let resp = match admin.request("POST", "/reload") {
        Ok(r) => r,
        Err(e) => {
            eprintln!("shellac: {e}");
            if let Some(hint) = unreachable_hint(&e.into()) {
                eprintln!("shellac: {hint}");
            }
            return ExitCode::FAILURE;
        }
    };
    let v: serde_json::Value = serde_json::from_str(&resp.body).unwrap_or_default();
    if resp.status == 200 {
        say!("reloaded: configuration generation {}", v["generation"]);
        for c in v["changes"].as_array().into_iter().flatten() {
            say!("  {}", c.as_str().unwrap_or_default());
        }
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "reload rejected; still running configuration generation {}:",
            v["generation"]
        );
        for e in v["errors"].as_array().into_iter().flatten() {
            eprintln!("error: {}", e.as_str().unwrap_or_default());
        }
        if v["errors"].is_null() {
            eprintln!("status {}: {}", resp.status, resp.body.trim());
        }
        ExitCode::FAILURE
    }
}
