//! HTTP/2 to backends (`[[backend]] protocol = "h2"`, h2c with prior knowledge): requests are
//! multiplexed over few connections, never more than `max_streams` at once on one, cached as
//! from an HTTP/1.1 backend, and health probes speak HTTP/2 too.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shellac::config::BackendProtocol;
use tokio::net::TcpListener;

/// An HTTP/2-only origin (h2c): counts connections, requests, and the most requests it ever
/// had at once on one connection. Each answer waits `delay`, then (at most 10 s) until the
/// origin has had `hold` requests in all (0 by default: no wait).
struct H2Origin {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    peak_per_conn: Arc<AtomicUsize>,
    hold: Arc<AtomicUsize>,
}

impl H2Origin {
    async fn start(delay: Duration) -> H2Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let hold = Arc::new(AtomicUsize::new(0));
        let (c, r, p, h) = (conns.clone(), requests.clone(), peak.clone(), hold.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (r, p, h) = (r.clone(), p.clone(), h.clone());
                let here = Arc::new(AtomicUsize::new(0));
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (r, p, h, here) = (r.clone(), p.clone(), h.clone(), here.clone());
                        async move {
                            r.fetch_add(1, Ordering::SeqCst);
                            let now = here.fetch_add(1, Ordering::SeqCst) + 1;
                            p.fetch_max(now, Ordering::SeqCst);
                            tokio::time::sleep(delay).await;
                            let until = std::time::Instant::now() + Duration::from_secs(10);
                            while r.load(Ordering::SeqCst) < h.load(Ordering::SeqCst)
                                && std::time::Instant::now() < until
                            {
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            here.fetch_sub(1, Ordering::SeqCst);
                            let body = format!(
                                "{} {} {:?} {}",
                                req.method(),
                                req.uri().path(),
                                req.version(),
                                req.uri().authority().map_or("-", |a| a.as_str())
                            );
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .header("cache-control", "max-age=60")
                                    .body(Full::new(Bytes::from(body)))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        H2Origin {
            addr,
            conns,
            requests,
            peak_per_conn: peak,
            hold,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_multiplexed_within_max_streams() {
    let origin = H2Origin::start(Duration::from_millis(300)).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].protocol = BackendProtocol::H2;
        c.backends[0].max_streams = 4;
    })
    .await;
    // One request first: the answer, as from an HTTP/1.1 backend, then a hit.
    let r = get(shellac.addr, "/one").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "GET /one HTTP/2.0 test.example");
    // (A hit, or — while the fill is still storing it — a wait on that fill.)
    let again = get(shellac.addr, "/one").await;
    assert_eq!(again.text(), r.text());
    assert_eq!(
        origin.requests.load(Ordering::SeqCst),
        1,
        "{}",
        again.cache_status()
    );
    // Twelve at once, distinct URLs: three connections' worth at 4 streams each. Each is
    // answered once all twelve reached the origin, so a slow machine sending them one by one
    // cannot make fewer connections enough.
    origin.hold.store(13, Ordering::SeqCst);
    let mut tasks = Vec::new();
    for i in 0..12 {
        let addr = shellac.addr;
        tasks.push(tokio::spawn(
            async move { get(addr, &format!("/m{i}")).await },
        ));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), format!("GET /m{i} HTTP/2.0 test.example"));
    }
    assert_eq!(origin.requests.load(Ordering::SeqCst), 13);
    assert!(
        origin.peak_per_conn.load(Ordering::SeqCst) <= 4,
        "at most max_streams at once on one connection"
    );
    let conns = origin.conns.load(Ordering::SeqCst);
    assert!((3..=4).contains(&conns), "{conns} connections");
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_h2_conn"] as usize, conns);
    assert_eq!(stats["backend_conn"] as usize, conns);
    assert!(stats["backend_reuse"] >= 13 - conns as u64);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_speak_http2() {
    let origin = H2Origin::start(Duration::ZERO).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].protocol = BackendProtocol::H2;
        let parsed = shellac::config::Config::parse(
            "[[probe]]\nname = \"p\"\nurl = \"/health\"\ninterval = \"100ms\"\n\n[[backend]]\nhost = \"h\"\nprobe = \"p\"\n",
            "probe.toml",
        )
        .unwrap();
        c.probes = parsed.probes;
        c.backends[0].probe = parsed.backends[0].probe.clone();
    })
    .await;
    for _ in 0..100 {
        if shellac.stat("backend_probe").await >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = shellac.stats().await;
    assert!(stats["backend_probe"] >= 3);
    assert_eq!(
        stats["backend_probe_fail"], 0,
        "an HTTP/2 backend answers HTTP/2 probes"
    );
    assert!(origin.requests.load(Ordering::SeqCst) >= 3);
    shellac.stop().await;
}

/// Issue 32: `server.max_response_headers` holds HTTP/2 response heads too (decoded whole, then
/// counted): the origin's three fields (`cache-control`, `content-length`, `date`) pass a limit
/// of 3 and are a 502 under a limit of 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_head_field_count_limit_is_a_setting_over_http2() {
    let origin = H2Origin::start(Duration::ZERO).await;
    for (limit, status) in [(3, 200), (2, 502)] {
        let shellac = Shellac::start(origin.addr, |c| {
            c.backends[0].protocol = BackendProtocol::H2;
            c.server.max_response_headers = limit;
        })
        .await;
        let r = get(shellac.addr, "/fields").await;
        assert_eq!(r.status, status, "limit {limit}: {}", r.cache_status());
        shellac.stop().await;
    }
}
