//! One include fetched: started as far as it goes without waiting when the assembly starts
//! it ([`start`]: a stored fragment's body comes back at once and is read in place), the rest
//! — waiting for `src`, its `alt` when `src` fails before its body, a body that stalls — in a
//! task of its own ([`fetch`], [`stream`]) whose chunks reach the assembly on a channel,
//! within `esi.include_timeout`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::Response;
use http::header;
use http_body_util::BodyExt;

use super::include::{Failure, Item, Page, request};
use crate::esi::{Include, Target};
use crate::proxy::Subrequest;
use crate::proxy::body::ResponseBody;

/// How an include started ([`start`]), without waiting.
pub enum Start {
    /// Its fragment answered at once (a stored one, usually): its body, read in place by the
    /// assembly while its chunks are ready ([`stream`] takes it over when one is not).
    Body(ResponseBody),
    /// It failed at once with nothing else to try, or the page tree's budget is spent.
    Failed(Failure),
    /// It has to wait: [`fetch`] does the rest in a task of its own.
    Later(Later),
}

/// What an include that has to wait still has to do.
pub enum Later {
    /// `src`'s answer (a miss, a coalesced fetch).
    Src(Waiting),
    /// `src` failed at once: its `alt`.
    Alt,
}

/// A sub-request's remaining steps ([`Subrequest::Waits`]).
pub type Waiting = std::pin::Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>>;

/// Starts `include` for `page` as far as it goes without waiting: the budget taken, `src`
/// asked for through the whole proxy; a stored fragment's body comes back at once, so a page
/// of cached includes is assembled without a task, a channel or a wait per include. The
/// caller checked the depth limit.
pub fn start(page: &Arc<Page>, include: &Include) -> Start {
    let counters = &page.proxy.counters;
    let failed = Failure::Failed {
        continue_on_error: include.continue_on_error,
    };
    if page.budget.0.fetch_sub(1, Ordering::Relaxed) <= 0 {
        counters.esi_include_limited.inc();
        counters.esi_include_failed.inc();
        return Start::Failed(failed);
    }
    let strict = include.alt.is_some() || include.continue_on_error;
    let body = match ask(page, &include.src) {
        Asked::Refused => None,
        Asked::Now(resp) => answer(page, &include.src, strict, resp),
        Asked::Waits(rest) => return Start::Later(Later::Src(rest)),
    };
    match body {
        Some(body) => Start::Body(body),
        None => {
            counters.esi_include_failed.inc();
            if include.alt.is_some() {
                Start::Later(Later::Alt)
            } else {
                Start::Failed(failed)
            }
        }
    }
}

/// Does what [`start`] left of `include` for `page`: waits for `src`, then tries `alt` when
/// `src` failed before its body; its body goes into `tx` chunk by chunk as it arrives
/// (waiting while the assembly is `AHEAD` chunks behind). `unknown`: [`Page::peek`] found
/// no stored copy.
pub async fn fetch(
    page: Arc<Page>,
    include: Include,
    later: Later,
    unknown: bool,
    tx: tokio::sync::mpsc::Sender<Item>,
) {
    let item = fetch_rest(&page, include, later, &tx).await;
    if unknown {
        page.settled();
    }
    // The assembly gone (client gone): nobody to tell.
    let _ = tx.send(item).await;
}

/// Streams `body`, an include's fragment that [`start`] answered at once but whose next
/// chunk is not there yet (a fragment still being fetched by another request), into `tx`
/// for the assembly, within `esi.include_timeout` from now.
pub async fn stream(
    page: Arc<Page>,
    include: Include,
    body: ResponseBody,
    tx: tokio::sync::mpsc::Sender<Item>,
) {
    let deadline = tokio::time::Instant::now() + page.proxy.config.esi.include_timeout.0;
    let item = stream_body(&page, &include, body, deadline, &tx).await;
    let _ = tx.send(item).await;
}

async fn fetch_rest(
    page: &Arc<Page>,
    include: Include,
    later: Later,
    tx: &tokio::sync::mpsc::Sender<Item>,
) -> Item {
    let counters = page.proxy.counters.clone();
    let failed = Item::Failed(Failure::Failed {
        continue_on_error: include.continue_on_error,
    });
    let strict = include.alt.is_some() || include.continue_on_error;
    // `esi.include_timeout` bounds the time spent waiting for the fragment's response, not
    // the time its chunks wait for the assembly (a slow client, an earlier fragment).
    let deadline = tokio::time::Instant::now() + page.proxy.config.esi.include_timeout.0;
    let timed_out = || {
        counters.esi_include_failed.inc();
        tracing::info!(path = %include.src.path, "ESI include failed: esi.include_timeout");
    };
    let mut body = match later {
        Later::Src(rest) => {
            let Ok(resp) = tokio::time::timeout_at(deadline, rest).await else {
                timed_out();
                return failed;
            };
            let body = answer(page, &include.src, strict, resp);
            if body.is_none() {
                counters.esi_include_failed.inc();
            }
            body
        }
        Later::Alt => None,
    };
    if body.is_none()
        && let Some(alt) = &include.alt
    {
        let Ok(b) = tokio::time::timeout_at(deadline, one(page, alt, strict)).await else {
            timed_out();
            return failed;
        };
        body = b;
        if body.is_some() {
            counters.esi_include_alt.inc();
        }
    }
    let Some(body) = body else {
        return failed;
    };
    stream_body(page, &include, body, deadline, tx).await
}

/// An include's body into `tx`, chunk by chunk; its end or its failure as the last item.
/// `deadline` moves on by the time spent waiting for the assembly.
async fn stream_body(
    page: &Arc<Page>,
    include: &Include,
    mut body: ResponseBody,
    mut deadline: tokio::time::Instant,
    tx: &tokio::sync::mpsc::Sender<Item>,
) -> Item {
    let counters = &page.proxy.counters;
    let failed = Item::Failed(Failure::Failed {
        continue_on_error: include.continue_on_error,
    });
    loop {
        let Ok(frame) = tokio::time::timeout_at(deadline, body.frame()).await else {
            counters.esi_include_failed.inc();
            tracing::info!(path = %include.src.path, "ESI include failed: esi.include_timeout");
            return failed;
        };
        match frame {
            None => return Item::End,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data()
                    && !data.is_empty()
                {
                    let waited = tokio::time::Instant::now();
                    if tx.send(Item::Chunk(data)).await.is_err() {
                        return Item::End;
                    }
                    deadline += waited.elapsed();
                }
            }
            Some(Err(e)) => return body_cut(page, include, &e),
        }
    }
}

/// A fragment's body that broke off: counted, logged, the include's failure.
pub(super) fn body_cut(page: &Page, include: &Include, e: &dyn std::fmt::Display) -> Item {
    page.proxy.counters.esi_include_failed.inc();
    tracing::info!(path = %include.src.path, error = %e, "ESI include failed: body cut");
    Item::Failed(Failure::Failed {
        continue_on_error: include.continue_on_error,
    })
}

/// How a sub-request went without waiting.
enum Asked {
    /// Refused: a host an absolute `src` may not name, or no request target.
    Refused,
    Now(Response<ResponseBody>),
    Waits(Waiting),
}

/// Asks for `target` through the whole proxy, as far as it goes without waiting.
fn ask(page: &Arc<Page>, target: &Target) -> Asked {
    let proxy = &page.proxy;
    let host = match &target.host {
        Some(h) if !page.host_allowed(h) => {
            proxy.counters.esi_include_refused.inc();
            tracing::warn!(host = %h, path = %target.path, "ESI include refused: host not allowed (esi.hosts)");
            return Asked::Refused;
        }
        Some(h) => h.as_str(),
        None => page.host.as_str(),
    };
    let Some(req) = request(page, host, &target.path) else {
        return Asked::Refused;
    };
    proxy.counters.esi_includes.inc();
    match proxy.clone().subrequest_now(req, page.client) {
        Subrequest::Done(resp) => Asked::Now(resp),
        Subrequest::Waits(rest) => Asked::Waits(rest),
    }
}

/// One sub-request for `target`: its body once its head is known to be good, or `None`
/// when it failed: refused host, a 5xx (with `strict`, any status from 400), an encoded body.
async fn one(page: &Arc<Page>, target: &Target, strict: bool) -> Option<ResponseBody> {
    let resp = match ask(page, target) {
        Asked::Refused => return None,
        Asked::Now(resp) => resp,
        Asked::Waits(rest) => rest.await,
    };
    answer(page, target, strict, resp)
}

/// A sub-request's response for `target` judged: its body when it is good (its freshness
/// folded into the page's), `None` for a 5xx (with `strict`, any status from 400) or an
/// encoded body.
fn answer(
    page: &Page,
    target: &Target,
    strict: bool,
    resp: Response<ResponseBody>,
) -> Option<ResponseBody> {
    let status = resp.status().as_u16();
    if status >= 500 || (strict && status >= 400) {
        tracing::info!(path = %target.path, status, "ESI include failed");
        return None;
    }
    if resp
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"))
    {
        tracing::warn!(path = %target.path, "ESI include failed: its body is encoded (Content-Encoding)");
        return None;
    }
    if let Ok(mut f) = page.freshness.lock() {
        f.add(resp.headers());
    }
    Some(resp.into_body())
}
