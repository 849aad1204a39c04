//! Live views for the terminal tools: `/log/stream` (transactions as JSON lines, filtered
//! server-side, dropped and announced when the reader is slow) and `/top` (rankings over a
//! sliding window).

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, Uri};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use regex::Regex;
use tokio::sync::{broadcast, mpsc};

use super::reply::{AdminBody, JSON, json, reply};
use crate::backend::director::Member;
use crate::proxy::Proxy;
use crate::txlog::top::{Counts, MAX_WINDOW};
use crate::txlog::{DecisionKind, Dimension, Record};

/// Lines buffered toward one `/log/stream` reader before records are dropped for it.
const STREAM_BUFFER: usize = 256;

/// Query parameters, percent-decoded (`+` is a space).
pub fn query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which transactions a `/log/stream` reader wants.
#[derive(Debug, Default)]
pub struct Filter {
    url: Option<Regex>,
    /// `5xx` → (500, 599); `404` → (404, 404).
    status: Option<(u16, u16)>,
    /// Only responses not served from the cache.
    miss: bool,
    /// The backend names that match: the one asked for, or every backend below a director
    /// (records name the backend that answered, never its director).
    backend: Option<Vec<String>>,
    /// Only reasons starting with this (`refused` for every refusal, `refused:bad-host`,
    /// `no-store`, ...): the words of `Cache-Status` `detail=` and the access log.
    reason: Option<String>,
    /// Only the requests this `[[site]]` answered.
    site: Option<String>,
}

impl Filter {
    pub fn parse(q: &HashMap<String, String>) -> Result<Filter, String> {
        let url = match q.get("url") {
            Some(r) => Some(Regex::new(r).map_err(|e| format!("url: {e}"))?),
            None => None,
        };
        let status = match q.get("status").map(|s| s.to_ascii_lowercase()) {
            None => None,
            Some(s) if s.len() == 3 && s.ends_with("xx") => match s[..1].parse::<u16>() {
                Ok(c @ 1..=5) => Some((c * 100, c * 100 + 99)),
                _ => return Err(format!("status: `{s}` is not 1xx..5xx or a code")),
            },
            Some(s) => match s.parse::<u16>() {
                Ok(c @ 100..=599) => Some((c, c)),
                _ => return Err(format!("status: `{s}` is not 1xx..5xx or a code")),
            },
        };
        let miss = matches!(q.get("miss").map(String::as_str), Some("1" | "true" | ""));
        Ok(Filter {
            url,
            status,
            miss,
            backend: q.get("backend").map(|b| vec![b.clone()]),
            reason: q.get("reason").cloned(),
            site: q.get("site").cloned(),
        })
    }

    pub fn matches(&self, r: &Record) -> bool {
        if let Some((lo, hi)) = self.status
            && !(lo..=hi).contains(&r.status)
        {
            return false;
        }
        if self.miss && r.decision.kind == DecisionKind::Hit {
            return false;
        }
        if let Some(names) = &self.backend
            && !r.backend().is_some_and(|b| names.iter().any(|n| n == b))
        {
            return false;
        }
        if let Some(s) = &self.site
            && r.site() != Some(s.as_str())
        {
            return false;
        }
        if let Some(p) = &self.reason
            && !r
                .decision
                .reason
                .as_deref()
                .is_some_and(|w| w.starts_with(p.as_str()))
        {
            return false;
        }
        if let Some(re) = &self.url
            && !re.is_match(r.target())
        {
            return false;
        }
        true
    }
}

/// A streamed body fed by a channel.
struct Lines(mpsc::Receiver<Bytes>);

impl Body for Lines {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

fn line(v: serde_json::Value) -> Bytes {
    let mut s = v.to_string();
    s.push('\n');
    Bytes::from(s)
}

/// `GET /log/stream?url=REGEX&status=5xx&miss=1&backend=NAME&site=NAME`: one JSON object per line. The
/// first line is `{"streaming": true}`; `{"dropped": N}` says N transactions were skipped
/// because this reader was too slow. While nobody streams, requests are not recorded for it.
pub fn log_stream(proxy: &Proxy, uri: &Uri) -> Response<AdminBody> {
    let mut filter = match Filter::parse(&query(uri)) {
        Ok(f) => f,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                super::reply::TEXT,
                format!("{e}\n").into_bytes(),
            );
        }
    };
    // A name that is no site would stream nothing, for ever: say so, as `/top` does.
    if let Some(refused) = unknown_site(proxy, filter.site.as_deref()) {
        return refused;
    }
    // The same for a backend; a director stands for every backend below it.
    if let Some(name) = filter.backend.as_ref().and_then(|b| b.first()) {
        match proxy.backends.get(name) {
            Some(member) => filter.backend = Some(backends_below(&member)),
            None => return unknown_backend(name),
        }
    }
    let mut sub = proxy.shared.recorder.subscribe();
    let (tx, rx) = mpsc::channel::<Bytes>(STREAM_BUFFER);
    let _ = tx.try_send(line(serde_json::json!({ "streaming": true })));
    tokio::spawn(async move {
        // Transactions this reader missed and has not been told about yet.
        let mut dropped: u64 = 0;
        loop {
            let record = tokio::select! {
                r = sub.rx.recv() => r,
                // Tell the reader as soon as it has room again, even if nothing else happens.
                permit = tx.reserve(), if dropped > 0 => match permit {
                    Ok(p) => {
                        p.send(line(serde_json::json!({ "dropped": dropped })));
                        dropped = 0;
                        continue;
                    }
                    Err(_) => return,
                },
                _ = tx.closed() => return,
            };
            match record {
                Ok(r) if filter.matches(&r) => {
                    if dropped > 0 {
                        // Still no room for the notice: this one is lost too.
                        dropped += 1;
                        continue;
                    }
                    match tx.try_send(line(r.to_json())) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(_)) => dropped += 1,
                        Err(mpsc::error::TrySendError::Closed(_)) => return,
                    }
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => dropped += n,
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    let mut resp = Response::new(Lines(rx).boxed());
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-ndjson"),
    );
    resp.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    resp
}

/// A 404 naming `site` when it is given and no `[[site]]` has that name.
fn unknown_site(proxy: &Proxy, site: Option<&str>) -> Option<Response<AdminBody>> {
    let name = site.filter(|name| !proxy.site_named(name))?;
    Some(reply(
        StatusCode::NOT_FOUND,
        super::reply::TEXT,
        format!("site: no [[site]] named `{name}` (GET /sites lists them)\n").into_bytes(),
    ))
}

/// A 404 naming `name`, which is neither a backend nor a director.
fn unknown_backend(name: &str) -> Response<AdminBody> {
    reply(
        StatusCode::NOT_FOUND,
        super::reply::TEXT,
        format!("backend: no backend or director named `{name}` (GET /backends lists them)\n")
            .into_bytes(),
    )
}

/// The names of the backends `member` is or holds, directors within directors included.
fn backends_below(member: &Member) -> Vec<String> {
    match member {
        Member::Backend(b) => vec![b.name().to_string()],
        Member::Director(d) => d.members.iter().flat_map(backends_below).collect(),
    }
}

/// `GET /top?by=url|host|backend|ua|site&sort=requests|misses|bytes&window=SECONDS&n=N&site=NAME`
/// (`site`: only the requests that `[[site]]` answered).
/// Asking keeps transactions flowing into the rankings for a minute (`collecting` says whether
/// they already were); `totals` counts every request of the window whether collected or not.
pub fn top(proxy: &Proxy, uri: &Uri) -> Response<AdminBody> {
    let q = query(uri);
    let by = q.get("by").map_or("url", String::as_str);
    let Some(dimension) = Dimension::parse(by) else {
        return reply(
            StatusCode::BAD_REQUEST,
            super::reply::TEXT,
            b"by: one of url, host, backend, ua, site\n".to_vec(),
        );
    };
    let sort_name = q.get("sort").map_or("requests", String::as_str);
    let sort: fn(&Counts) -> u64 = match sort_name {
        "requests" => |c| c.requests,
        "misses" => |c| c.misses,
        "bytes" => |c| c.bytes,
        _ => {
            return reply(
                StatusCode::BAD_REQUEST,
                super::reply::TEXT,
                b"sort: one of requests, misses, bytes\n".to_vec(),
            );
        }
    };
    let window = q
        .get("window")
        .and_then(|w| w.parse::<u64>().ok())
        .unwrap_or(MAX_WINDOW)
        .clamp(1, MAX_WINDOW);
    let n = q
        .get("n")
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(20)
        .clamp(1, 1000);
    let site = q.get("site").map(String::as_str);
    if let Some(refused) = unknown_site(proxy, site) {
        return refused;
    }
    let recorder = &proxy.shared.recorder;
    let collecting = recorder.lease_top();
    let rows: Vec<serde_json::Value> = recorder
        .top(dimension, sort, window, n, site)
        .into_iter()
        .map(|(key, c)| {
            serde_json::json!({
                "key": key,
                "requests": c.requests,
                "misses": c.misses,
                "bytes": c.bytes,
            })
        })
        .collect();
    reply(
        StatusCode::OK,
        JSON,
        json(serde_json::json!({
            "by": dimension.as_str(),
            "site": site,
            "sort": sort_name,
            "window": window,
            "collecting": collecting,
            "rows": rows,
            "totals": match site {
                None => totals(proxy, window),
                // The counter history is not kept per site.
                Some(_) => serde_json::Value::Null,
            },
        })),
    )
}

/// Every request of the last `window` seconds from the counter history, which runs whether
/// or not anybody watches: the first `shellac top` shows the traffic the rankings (collected
/// only while watched) missed. `requests` is `client_req`, `misses` the requests not served
/// from the cache (as the rankings count them), `bytes` what went to clients (`s_resp_bytes`),
/// `seconds` the span actually covered (shorter in a young process).
fn totals(proxy: &Proxy, window: u64) -> serde_json::Value {
    let history = &proxy.shared.history;
    let now = std::time::Instant::now();
    let live = proxy.sample();
    let Some(base) = history.base(window, now) else {
        return serde_json::Value::Null;
    };
    let delta = |name: &str| {
        history
            .value(&live.values, name)
            .saturating_sub(history.value(&base.values, name))
    };
    let requests = delta("client_req");
    serde_json::json!({
        "requests": requests,
        "misses": requests.saturating_sub(history.hits(&base.values, &live.values)),
        "bytes": delta("s_resp_bytes"),
        "seconds": now.saturating_duration_since(base.at).as_secs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txlog::Decision;

    #[test]
    fn query_decoding() {
        let uri: Uri = "/log/stream?url=%5E%2Fa.*%24&status=5xx&miss&backend=my+app"
            .parse()
            .unwrap();
        let q = query(&uri);
        assert_eq!(q["url"], "^/a.*$");
        assert_eq!(q["status"], "5xx");
        assert_eq!(q["miss"], "");
        assert_eq!(q["backend"], "my app");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
    }

    #[test]
    fn filters() {
        let q = |s: &str| query(&format!("/x?{s}").parse::<Uri>().unwrap());
        let mut r = Record::sample();
        r.status = 503;
        assert!(Filter::parse(&q("status=5xx")).unwrap().matches(&r));
        assert!(!Filter::parse(&q("status=4xx")).unwrap().matches(&r));
        assert!(Filter::parse(&q("status=503")).unwrap().matches(&r));
        assert!(Filter::parse(&q("url=%5E/a/")).unwrap().matches(&r));
        assert!(!Filter::parse(&q("url=%5E/b")).unwrap().matches(&r));
        assert!(Filter::parse(&q("miss=1&backend=app")).unwrap().matches(&r));
        assert!(!Filter::parse(&q("backend=other")).unwrap().matches(&r));
        // Issue 31: one site's requests.
        assert!(!Filter::parse(&q("site=blog")).unwrap().matches(&r));
        r.set_site(Some("blog"));
        assert!(Filter::parse(&q("site=blog")).unwrap().matches(&r));
        assert!(!Filter::parse(&q("site=shop")).unwrap().matches(&r));
        r.decision.kind = DecisionKind::Hit;
        assert!(!Filter::parse(&q("miss=1")).unwrap().matches(&r));
        assert!(Filter::parse(&q("reason=no-st")).unwrap().matches(&r));
        assert!(!Filter::parse(&q("reason=refused")).unwrap().matches(&r));
        r.decision = Decision {
            kind: DecisionKind::Synth,
            reason: Some("refused:bad-host".into()),
        };
        assert!(Filter::parse(&q("reason=refused")).unwrap().matches(&r));
        assert!(
            Filter::parse(&q("reason=refused%3Abad-host"))
                .unwrap()
                .matches(&r)
        );
        assert!(
            !Filter::parse(&q("reason=refused%3Abad-method"))
                .unwrap()
                .matches(&r)
        );
        assert!(Filter::parse(&q("status=6xx")).is_err());
        assert!(Filter::parse(&q("url=(")).is_err());
    }
}
