//! `GET /acme` (each ACME certificate's state), `POST /acme/renew[?name=NAME]` (renew now)
//! and the per-certificate ACME families of `/metrics`.

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::reply::{AdminBody, JSON, TEXT, json, reply};
use crate::proxy::Proxy;

/// Whether the request is for this module.
pub fn handles(req: &Request<Incoming>) -> bool {
    let p = req.uri().path();
    p == "/acme" || p.starts_with("/acme/")
}

pub fn route(proxy: &Proxy, req: Request<Incoming>) -> hyper::Response<AdminBody> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/acme") => reply(StatusCode::OK, JSON, json(status(proxy))),
        (&Method::POST, "/acme/renew") => renew(proxy, req.uri().query()),
        (_, "/acme") => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            b"use GET /acme\n".to_vec(),
        ),
        (_, "/acme/renew") => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            b"use POST /acme/renew[?name=NAME]\n".to_vec(),
        ),
        _ => reply(StatusCode::NOT_FOUND, TEXT, b"not found\n".to_vec()),
    }
}

/// Every ACME certificate: its settings that matter to an operator and its state.
pub fn status(proxy: &Proxy) -> serde_json::Value {
    let list: Vec<serde_json::Value> = proxy
        .shared
        .acme
        .managed()
        .iter()
        .map(|m| {
            let mut v = serde_json::to_value(m.status()).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("listener".into(), m.listener.as_ref().into());
                o.insert("names".into(), m.settings.names.clone().into());
                o.insert("challenge".into(), m.settings.challenge.as_str().into());
                o.insert("directory".into(), m.settings.directory.clone().into());
                o.insert(
                    "state_dir".into(),
                    m.settings.state_dir.display().to_string().into(),
                );
                for key in ["not_before", "not_after", "renew_at", "next_attempt"] {
                    if let Some(t) = o.get(key).and_then(|t| t.as_i64()) {
                        o.insert(
                            format!("{key}_text"),
                            crate::tls::certs::format_time(t).into(),
                        );
                    }
                }
            }
            v
        })
        .collect();
    serde_json::json!({ "certificates": list })
}

/// Wakes the workers of `name` (any of a certificate's names), or of every certificate.
fn renew(proxy: &Proxy, query: Option<&str>) -> hyper::Response<AdminBody> {
    let name = query.and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("name="))
            .map(str::to_ascii_lowercase)
    });
    let managed = proxy.shared.acme.managed();
    let chosen: Vec<_> = managed
        .iter()
        .filter(|m| name.as_ref().is_none_or(|n| m.settings.names.contains(n)))
        .collect();
    if chosen.is_empty() {
        let msg = match &name {
            Some(n) => format!("no [[tls.acme]] certificate covers {n}\n"),
            None => "no [[tls.acme]] certificate is configured\n".into(),
        };
        return reply(StatusCode::NOT_FOUND, TEXT, msg.into_bytes());
    }
    for m in &chosen {
        m.renew_now();
    }
    let names: Vec<&str> = chosen.iter().map(|m| m.name()).collect();
    reply(
        StatusCode::ACCEPTED,
        JSON,
        json(serde_json::json!({ "renewing": names })),
    )
}

/// One row of the per-certificate families: (listener, first name, not after, renew at,
/// failures in a row).
#[derive(Debug)]
pub struct Row {
    listener: String,
    name: String,
    not_after: Option<i64>,
    renew_at: Option<i64>,
    failures: u32,
}

/// The rows of every ACME certificate, read once per scrape.
pub fn rows(proxy: &Proxy) -> Vec<Row> {
    proxy
        .shared
        .acme
        .managed()
        .iter()
        .map(|m| {
            let st = m.status();
            Row {
                listener: m.listener.to_string(),
                name: m.name().to_string(),
                not_after: st.not_after,
                renew_at: st.renew_at,
                failures: st.failures,
            }
        })
        .collect()
}

/// `shellac_acme_certificate_expiry_seconds`, `..._renewal_seconds` and `..._failures`.
pub fn encode(rows: &[Row], encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    type Pick = fn(&Row) -> Option<i64>;
    let families: [(&str, &str, Pick); 3] = [
        (
            "shellac_acme_certificate_expiry_seconds",
            "When the ACME certificate in service expires (seconds since the epoch; absent before the first)",
            |r| r.not_after,
        ),
        (
            "shellac_acme_certificate_renewal_seconds",
            "When the ACME certificate in service is due for renewal (seconds since the epoch)",
            |r| r.renew_at,
        ),
        (
            "shellac_acme_certificate_failures",
            "Failed ACME attempts in a row for the certificate (0 after a success)",
            |r| Some(i64::from(r.failures)),
        ),
    ];
    for (name, help, pick) in families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for r in rows {
            if let Some(v) = pick(r) {
                let labels = [("listener", r.listener.as_str()), ("name", r.name.as_str())];
                ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    Ok(())
}
