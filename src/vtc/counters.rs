//! Varnish counters (`varnish vN -expect NAME OP VALUE`) read from Shellac's `/stats` and
//! `/backends`. One table maps each Varnish counter with a Shellac equivalent to the sum of
//! the Shellac counters that count the same thing; a counter without one makes the file
//! skipped, naming it. Names without a dot are `MAIN.` ones, as varnishtest has them.

use serde_json::Value;

use crate::client::AdminClient;

use super::context::{Halt, Step, fail, skip};

/// `MAIN.<name>` → the Shellac counters whose sum it is. Where Varnish counts a request as a
/// hit, Shellac may count it under two names (a fresh hit, a hit within grace).
const MAIN: &[(&str, &[&str])] = &[
    ("client_req", &["client_req"]),
    // 2.1's name for it.
    ("s_req", &["client_req"]),
    ("client_req_400", &["client_req_400"]),
    ("sess_conn", &["client_conn"]),
    ("s_sess", &["client_conn"]),
    ("client_conn", &["client_conn"]),
    ("cache_hit", &["cache_hit", "cache_grace_hit"]),
    ("cache_hit_grace", &["cache_grace_hit"]),
    // Varnish's cnt_miss counts a hit-for-miss too (it runs vcl_miss).
    ("cache_miss", &["cache_miss", "cache_hitmiss"]),
    ("cache_hitmiss", &["cache_hitmiss"]),
    ("cache_hitpass", &["cache_hitpass"]),
    ("busy_sleep", &["cache_busy_wait"]),
    ("n_object", &["n_object"]),
    ("n_lru_nuked", &["n_lru_nuked"]),
    ("s_pass", &["cache_pass"]),
    ("s_fetch", &["backend_req"]),
    ("s_synth", &["synth_resp"]),
    ("s_resp_bodybytes", &["s_resp_bytes"]),
    ("backend_conn", &["backend_conn"]),
    ("backend_reuse", &["backend_reuse"]),
    ("backend_recycle", &["backend_recycle"]),
    ("backend_fail", &["backend_fail"]),
    ("backend_busy", &["backend_busy"]),
    ("backend_wait", &["backend_wait"]),
    ("backend_wait_fail", &["backend_wait_fail"]),
    ("backend_retry", &["backend_retry"]),
    ("fetch_failed", &["fetch_failed"]),
    ("bans_added", &["ban_added"]),
    ("n_gzip", &["compress_gzip"]),
    ("n_gunzip", &["compress_gunzip"]),
    ("n_test_gunzip", &["compress_gzip_checked"]),
    // 2.1's name for it.
    ("n_purge_add", &["ban_added"]),
    ("esi_errors", &["esi_errors"]),
    ("esi_warnings", &["esi_warnings"]),
    // 2.1's objects found to hold ESI when parsed at fetch.
    ("esi_parse", &["esi_programs"]),
    ("esi_req", &["esi_includes"]),
];

/// `VBE.<vcl>.<backend>.<field>` → the field of the backend in `/backends`. Varnish's
/// `conn` is a gauge, the connections in use by fetches now (`in_flight`; Shellac's own
/// `conn` counts connections opened).
const VBE: &[(&str, &str)] = &[("req", "req"), ("busy", "busy"), ("conn", "in_flight")];

/// Where a Varnish counter's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The sum of these `/stats` counters.
    Main(Vec<&'static str>),
    /// A field of one backend in `/backends`.
    Backend { name: String, field: &'static str },
    /// The number of backends in `/backends` (`n_backend`).
    Backends,
    /// A field of one storage in `/storages` (`SMA.NAME.g_bytes`, `SM?.NAME.g_space`).
    Storage { name: String, field: &'static str },
}

/// `SM?.<storage>.<field>` → the field of the storage in `/storages`: Varnish's `g_bytes`
/// (bytes in use) and `g_alloc` (allocations outstanding: one per object here). Not
/// `g_space`: the scripts compare it within a few hundred bytes of a full storage
/// (`g_space < 200`), Varnish's allocations counted byte for byte, where Shellac charges an
/// object its weight with its own bookkeeping (`free` in `/storages`).
const SM: &[(&str, &str)] = &[("g_bytes", "bytes"), ("g_alloc", "objects")];

/// The Shellac source of Varnish counter `pattern` (as written in the file); `active` is the
/// name of the VCL in use (`VBE.NAME.*` of another VCL has no equivalent; `None`: any).
pub fn source(pattern: &str, active: Option<&str>) -> Step<Source> {
    let unmapped = || {
        skip(format!(
            "Varnish counter {pattern} has no Shellac equivalent"
        ))
    };
    let name = pattern.strip_prefix("MAIN.").unwrap_or(pattern);
    if !name.contains('.') {
        if name == "n_backend" {
            return Ok(Source::Backends);
        }
        return match MAIN.iter().find(|(n, _)| *n == name) {
            Some((_, sum)) => Ok(Source::Main(sum.to_vec())),
            None => unmapped(),
        };
    }
    let parts: Vec<&str> = name.split('.').collect();
    if let ["VBE", vcl, backend, field] = parts[..]
        && (active.is_none_or(|a| a == vcl) || vcl == "*")
        && !backend.contains(['*', '?', '['])
        && let Some((_, f)) = VBE.iter().find(|(n, _)| *n == field)
    {
        return Ok(Source::Backend {
            name: backend.to_string(),
            field: f,
        });
    }
    if let [kind, storage, field] = parts[..]
        && matches!(kind, "SM?" | "SMA" | "SMF" | "SMU")
        && !storage.contains(['*', '?', '['])
        && let Some((_, f)) = SM.iter().find(|(n, _)| *n == field)
    {
        return Ok(Source::Storage {
            name: storage.to_string(),
            field: f,
        });
    }
    unmapped()
}

/// The value of `source` in the running process; `None` when it does not exist (a backend
/// the VCL does not have).
pub fn read(admin: &AdminClient, source: &Source) -> Step<Option<u64>> {
    let get = |path: &str| -> Step<Value> {
        admin
            .get_json(path)
            .map_err(|e| Halt::Fail(format!("GET {path} on the admin listener: {e}")))
    };
    match source {
        Source::Main(names) => {
            let stats = get("/stats")?;
            let mut sum = 0u64;
            for n in names {
                match stats.get(*n).and_then(Value::as_u64) {
                    Some(v) => sum += v,
                    None => return fail(format!("/stats has no counter {n}")),
                }
            }
            Ok(Some(sum))
        }
        Source::Backends => {
            let b = get("/backends")?;
            Ok(Some(
                b.get("backends")
                    .and_then(Value::as_array)
                    .map_or(0, |a| a.len() as u64),
            ))
        }
        Source::Storage { name, field } => {
            let s = get("/storages")?;
            Ok(s.as_array()
                .and_then(|a| {
                    a.iter()
                        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
                })
                .and_then(|e| e.get(*field))
                .and_then(Value::as_u64))
        }
        Source::Backend { name, field } => {
            let b = get("/backends")?;
            Ok(b.get("backends")
                .and_then(Value::as_array)
                .and_then(|a| {
                    a.iter()
                        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
                })
                .and_then(|e| e.get(*field))
                .and_then(Value::as_u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_or_skip() {
        assert_eq!(
            source("cache_hit", Some("vcl1")),
            Ok(Source::Main(vec!["cache_hit", "cache_grace_hit"]))
        );
        assert_eq!(
            source("MAIN.client_req", Some("vcl1")),
            Ok(Source::Main(vec!["client_req"]))
        );
        assert_eq!(source("n_backend", Some("vcl3")), Ok(Source::Backends));
        assert_eq!(
            source("VBE.vcl2.s1.req", Some("vcl2")),
            Ok(Source::Backend {
                name: "s1".into(),
                field: "req"
            })
        );
        assert_eq!(
            source("VBE.vcl1.s1.conn", Some("vcl1")),
            Ok(Source::Backend {
                name: "s1".into(),
                field: "in_flight"
            })
        );
        assert!(matches!(
            source("VBE.vcl1.s1.req", Some("vcl2")),
            Err(Halt::Skip(_))
        ));
        assert_eq!(
            source("SM?.Transient.g_bytes", None),
            Ok(Source::Storage {
                name: "Transient".into(),
                field: "bytes"
            })
        );
        assert_eq!(
            source("SMA.s1.g_alloc", None),
            Ok(Source::Storage {
                name: "s1".into(),
                field: "objects"
            })
        );
        assert!(matches!(source("SM?.s1.g_space", None), Err(Halt::Skip(_))));
        assert!(matches!(source("SM?.s0.c_fail", None), Err(Halt::Skip(_))));
        assert!(matches!(source("n_expired", None), Err(Halt::Skip(_))));
    }
}
