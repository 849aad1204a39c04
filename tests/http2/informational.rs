//! 1xx responses from backends (103 Early Hints, 102 Processing) to HTTP/2 clients: each an
//! interim HEADERS frame (`:status 1xx`, no END_STREAM) on the request's stream before the
//! final response's HEADERS (RFC 9113 §8.1), without connection-specific fields (§8.2.2), at
//! most 8 per request, never stored or replayed on a hit — over h2c and over TLS (ALPN h2).
//! Clients: Python's h2 (python3-h2: its own HPACK decoder and stream state machine, which
//! refuses a 1xx after the final HEADERS) and curl (nghttp2).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::common::raw_origin::{GatedOrigin, RawOrigin, read_until};
use crate::common::tls::{Pki, tls_table};
use crate::common::*;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::Command;
use tokio::sync::Notify;

fn h2c(c: &mut shellac::config::Config) {
    c.http2.h2c = shellac::config::http2::H2c::All;
}

/// The client: each argument after the port is a batch of comma-separated paths, requested at
/// once on one connection; the next batch goes when the previous one has ended. Prints one
/// JSON line per event, as it comes: `{"ev": "info"|"response"|"end", "sid", "path",
/// "headers"}`, then `done`.
const CLIENT: &str = r#"
import json, socket, sys
import h2.connection, h2.config, h2.events
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
s.sendall(c.data_to_send())

def say(ev, sid, path, headers=None):
    print(json.dumps({"ev": ev, "sid": sid, "path": path, "headers": headers}), flush=True)

for batch in sys.argv[2:]:
    paths = {}
    for p in batch.split(","):
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "GET"), (":scheme", "http"),
                             (":authority", "hints.test"), (":path", p)], end_stream=True)
        paths[sid] = p
    s.sendall(c.data_to_send())
    left = set(paths)
    while left:
        data = s.recv(65536)
        assert data, "connection closed"
        for e in c.receive_data(data):
            if isinstance(e, h2.events.InformationalResponseReceived):
                say("info", e.stream_id, paths[e.stream_id], [list(h) for h in e.headers])
            elif isinstance(e, h2.events.ResponseReceived):
                say("response", e.stream_id, paths[e.stream_id], [list(h) for h in e.headers])
            elif isinstance(e, h2.events.DataReceived):
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.StreamEnded):
                say("end", e.stream_id, paths[e.stream_id])
                left.discard(e.stream_id)
            elif isinstance(e, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                raise AssertionError(f"unexpected {e}")
        s.sendall(c.data_to_send())
print("done", flush=True)
"#;

/// One event the client printed.
#[derive(Debug)]
struct Ev {
    ev: String,
    sid: u64,
    path: String,
    headers: Vec<(String, String)>,
}

impl Ev {
    fn parse(line: &str) -> Ev {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let headers = v["headers"]
            .as_array()
            .map(|hs| {
                hs.iter()
                    .map(|h| {
                        (
                            h[0].as_str().unwrap_or_default().to_string(),
                            h[1].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ev {
            ev: v["ev"].as_str().unwrap_or_default().to_string(),
            sid: v["sid"].as_u64().unwrap_or_default(),
            path: v["path"].as_str().unwrap_or_default().to_string(),
            headers,
        }
    }

    fn get(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// The Python client, started: its events are read line by line (bounded: 10 s each).
struct Client {
    child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Client {
    fn start(python: &PathBuf, port: u16, batches: &[&str]) -> Client {
        let mut child = Command::new(python)
            .args(["-c", CLIENT, &port.to_string()])
            .args(batches)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python runs");
        let stdout = child.stdout.take().expect("piped");
        Client {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next event, or None at `done`.
    async fn next(&mut self) -> Option<Ev> {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("the client goes on in time")
            .expect("read");
        match line.as_deref() {
            Some("done") => None,
            Some(line) => Some(Ev::parse(line)),
            None => {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err).await;
                }
                panic!("the client ended early: {err}");
            }
        }
    }

    /// Every event up to `done`.
    async fn rest(&mut self) -> Vec<Ev> {
        let mut all = Vec::new();
        while let Some(e) = self.next().await {
            all.push(e);
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        all
    }
}

/// The next line a client printed ("" at its end; bounded: 10 s).
async fn line(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("in time")
        .expect("read")
        .unwrap_or_default()
}

/// A 103 reaches the h2c client as its own HEADERS on the request's stream while the backend
/// is still working on the final response (the origin sends the page only after the client
/// has the hints), with its `Link` field and without the fields the backend's `Connection`
/// named; the page is cached, and the hit on the same connection gets no 103.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_hints_reach_an_h2c_client_before_the_final_headers_and_a_hit_gets_none() {
    let Some(python) = tools::require(tools::python_with_h2().await, "python3-h2", "python3-h2")
    else {
        return;
    };
    let origin = GatedOrigin::start(
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\
          Connection: x-secret\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 4\r\n\r\npage",
    )
    .await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let mut client = Client::start(&python, shellac.addr.port(), &["/page", "/page"]);
    let hints = client.next().await.expect("an event");
    assert_eq!(hints.ev, "info", "the 103 first: {hints:?}");
    assert_eq!(hints.sid, 1);
    assert_eq!(hints.get(":status"), ["103"], "{hints:?}");
    assert_eq!(
        hints.get("link"),
        ["</style.css>; rel=preload"],
        "{hints:?}"
    );
    for gone in ["connection", "x-secret", "keep-alive"] {
        assert!(hints.get(gone).is_empty(), "{gone}: {hints:?}");
    }
    // Only now does the origin send the final response.
    origin.go.notify_one();
    let events = client.rest().await;
    let kinds: Vec<(&str, u64)> = events.iter().map(|e| (e.ev.as_str(), e.sid)).collect();
    assert_eq!(
        kinds,
        [("response", 1), ("end", 1), ("response", 3), ("end", 3)],
        "{events:?}"
    );
    assert_eq!(events[0].get(":status"), ["200"]);
    let hit = &events[2];
    assert!(
        hit.get("cache-status").iter().any(|v| v.contains("hit")),
        "{hit:?}"
    );
    assert_eq!(shellac.stat("client_interim").await, 1);
    assert_eq!(shellac.stat("client_interim_dropped").await, 0);
    shellac.stop().await;
    origin.abort();
}

/// Two requests for the same URL at once (one fetch; the second waits on it): the request
/// whose fetch got the 103 has it, the one waiting on that fetch gets none — as over HTTP/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalesced_waiter_gets_no_hints() {
    let Some(python) = tools::require(tools::python_with_h2().await, "python3-h2", "python3-h2")
    else {
        return;
    };
    // One connection, one request: a second fetch would never be answered.
    let origin = GatedOrigin::start(
        b"HTTP/1.1 103 Early Hints\r\nLink: </shared.css>; rel=preload\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 6\r\n\r\nshared",
    )
    .await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let mut client = Client::start(&python, shellac.addr.port(), &["/shared,/shared"]);
    let hints = client.next().await.expect("an event");
    assert_eq!(hints.ev, "info", "{hints:?}");
    // Both requests are in (one read carried both HEADERS frames; each is looked up as it
    // is accepted): the second is waiting on the first one's fetch.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while shellac.stat("h2_req").await < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second request never came"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    origin.go.notify_one();
    let mut events = vec![hints];
    events.extend(client.rest().await);
    let info: Vec<u64> = events
        .iter()
        .filter(|e| e.ev == "info")
        .map(|e| e.sid)
        .collect();
    assert_eq!(info.len(), 1, "{events:?}");
    let ends = events.iter().filter(|e| e.ev == "end").count();
    assert_eq!(ends, 2, "{events:?}");
    // The waiter is counted `cache_coalesced` if it joined the fetch while the body streamed,
    // or as a hit if the object was complete when its wait ended; either way it waited, and
    // the origin had one request.
    let stats = shellac.stats().await;
    assert_eq!(
        stats["cache_coalesced"] + stats["cache_hit"],
        1,
        "{stats:?}"
    );
    assert_eq!(stats["cache_miss"], 1, "{stats:?}");
    assert_eq!(stats["client_interim"], 1, "{stats:?}");
    shellac.stop().await;
    origin.abort();
}

/// Two requests at once on one connection: each stream gets its own hints (102 then 103, in
/// order), never the other's; 100 Continue is not forwarded. A backend sending 12 × 103
/// gets 8 through (the bound per request, as over HTTP/1.1), the rest counted as dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_stream_gets_its_own_hints_in_order_and_at_most_eight() {
    let Some(python) = tools::require(tools::python_with_h2().await, "python3-h2", "python3-h2")
    else {
        return;
    };
    let origin = RawOrigin::start(|req| {
        let text = String::from_utf8_lossy(req);
        let path = text.split(' ').nth(1).unwrap_or("/").to_string();
        let name = path.trim_start_matches('/');
        let mut out = String::new();
        if name == "many" {
            for i in 0..12 {
                out.push_str(&format!(
                    "HTTP/1.1 103 Early Hints\r\nLink: </{i}.css>; rel=preload\r\n\r\n"
                ));
            }
        } else {
            out.push_str("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n");
            out.push_str(&format!(
                "HTTP/1.1 103 Early Hints\r\nLink: </{name}.css>; rel=preload\r\n\r\n"
            ));
        }
        out.push_str(&format!(
            "HTTP/1.1 200 OK\r\ncache-control: no-store\r\ncontent-length: {}\r\n\r\n{path}",
            path.len()
        ));
        out.into_bytes()
    })
    .await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let mut client = Client::start(&python, shellac.addr.port(), &["/one,/two", "/many"]);
    let events = client.rest().await;
    for path in ["/one", "/two"] {
        let mine: Vec<&Ev> = events.iter().filter(|e| e.path == path).collect();
        let kinds: Vec<&str> = mine.iter().map(|e| e.ev.as_str()).collect();
        assert_eq!(
            kinds,
            ["info", "info", "response", "end"],
            "{path}: {events:?}"
        );
        assert_eq!(mine[0].get(":status"), ["102"], "{mine:?}");
        assert_eq!(mine[1].get(":status"), ["103"], "{mine:?}");
        let link = format!("<{path}.css>; rel=preload");
        assert_eq!(mine[1].get("link"), [link.as_str()], "{mine:?}");
        assert_eq!(mine[2].get(":status"), ["200"], "{mine:?}");
    }
    let many: Vec<&Ev> = events.iter().filter(|e| e.path == "/many").collect();
    let hints: Vec<&&Ev> = many.iter().filter(|e| e.ev == "info").collect();
    assert_eq!(hints.len(), 8, "{many:?}");
    for (i, h) in hints.iter().enumerate() {
        let link = format!("</{i}.css>; rel=preload");
        assert_eq!(h.get("link"), [link.as_str()], "in order: {many:?}");
    }
    assert_eq!(many.last().map(|e| e.ev.as_str()), Some("end"));
    assert_eq!(many[many.len() - 2].ev, "response", "{many:?}");
    assert_eq!(shellac.stat("client_interim").await, 4 + 8);
    assert_eq!(shellac.stat("client_interim_dropped").await, 4);
    shellac.stop().await;
    origin.stop();
}

/// curl (nghttp2) shows the 103 before the 200, over h2c with prior knowledge and over TLS
/// with ALPN h2; the second request of each, a hit, shows none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_sees_early_hints_over_h2c_and_tls() {
    let Some(curl) = tools::require(tools::which("curl"), "curl", "curl") else {
        return;
    };
    let origin = RawOrigin::start(|_| {
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
          HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 4\r\n\r\npage"
            .to_vec()
    })
    .await;
    let pki = Pki::new("hints");
    let cert = pki.leaf("site", &["site.test"]);
    let text = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], "")
    );
    let tls = shellac::config::Config::parse(&text, "t.toml").unwrap().tls;
    let shellac = Shellac::start(origin.addr, |c| {
        h2c(c);
        c.tls = tls;
    })
    .await;
    let port = shellac.tls_addrs()[0].port();
    let resolve = format!("site.test:{port}:127.0.0.1");
    let runs: [(Vec<String>, String); 2] = [
        (
            vec!["--http2-prior-knowledge".into()],
            format!("http://{}/clear", shellac.addr),
        ),
        (
            vec![
                "--http2".into(),
                "--cacert".into(),
                pki.ca_file.display().to_string(),
                "--resolve".into(),
                resolve,
            ],
            format!("https://site.test:{port}/tls"),
        ),
    ];
    for (flags, url) in &runs {
        for first in [true, false] {
            let out = Command::new(&curl)
                .args(["-si"])
                .args(flags)
                .arg(url)
                .output()
                .await
                .expect("curl runs");
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(text.ends_with("page"), "{url}: {text}{err}");
            let final_at = text.find("HTTP/2 200").expect("a final response");
            if first {
                let hints_at = text.find("HTTP/2 103").expect("the 103");
                assert!(hints_at < final_at, "{url}: {text}");
                let link = text.find("link: </style.css>; rel=preload").expect("Link");
                assert!(hints_at < link && link < final_at, "{url}: {text}");
            } else {
                assert!(!text.contains("103"), "a hit: {url}: {text}");
                assert!(text.contains("hit"), "{url}: {text}");
            }
        }
    }
    assert_eq!(shellac.stat("client_interim").await, 2);
    shellac.stop().await;
    origin.stop();
}

/// The client resets its stream after the first 103; the backend then sends another 103 and
/// its answer: nothing more is sent on the reset stream (the request and its fetch end with
/// the stream, or a late 103 is refused by h2), and the connection goes on — the next request
/// on it is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_for_a_reset_stream_are_dropped_and_the_connection_goes_on() {
    let Some(python) = tools::require(tools::python_with_h2().await, "python3-h2", "python3-h2")
    else {
        return;
    };
    const SCRIPT: &str = r#"
import json, socket, sys
import h2.connection, h2.config, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
def get(path):
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "GET"), (":scheme", "http"),
                         (":authority", "hints.test"), (":path", path)], end_stream=True)
    s.sendall(c.data_to_send())
    return sid
def events():
    data = s.recv(65536)
    assert data, "connection closed"
    evs = c.receive_data(data)
    s.sendall(c.data_to_send())
    return evs
first = get("/slow")
done = False
while not done:
    for e in events():
        if isinstance(e, h2.events.InformationalResponseReceived):
            c.reset_stream(first)
            s.sendall(c.data_to_send())
            print("reset", flush=True)
            done = True
sys.stdin.readline()  # the origin has sent the rest for /slow
second = get("/after")
seen = []
while True:
    for e in events():
        if getattr(e, "stream_id", None) == first and not isinstance(e, h2.events.StreamReset):
            seen.append(type(e).__name__)
        if isinstance(e, h2.events.ResponseReceived) and e.stream_id == second:
            print("status", dict(e.headers)[":status"], flush=True)
        if isinstance(e, h2.events.StreamEnded) and e.stream_id == second:
            print("after-first", json.dumps(seen), flush=True)
            sys.exit(0)
        if isinstance(e, h2.events.ConnectionTerminated):
            raise AssertionError(f"unexpected {e}")
"#;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let go = Arc::new(Notify::new());
    let sent = Arc::new(Notify::new());
    let (origin_go, origin_sent) = (go.clone(), sent.clone());
    let origin = tokio::spawn(async move {
        let mut first = true;
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let mut text = String::new();
            read_until(&mut s, &mut text, "\r\n\r\n").await;
            if first && text.starts_with("GET /slow ") {
                first = false;
                let (go, sent) = (origin_go.clone(), origin_sent.clone());
                tokio::spawn(async move {
                    let hints = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n";
                    let _ = s.write_all(hints).await;
                    go.notified().await;
                    let _ = s.write_all(hints).await;
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncache-control: no-store\r\ncontent-length: 4\r\n\r\nslow",
                        )
                        .await;
                    sent.notify_one();
                    let mut rest = [0u8; 1024];
                    let _ = tokio::time::timeout(Duration::from_secs(5), s.read(&mut rest)).await;
                });
            } else {
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nafter")
                    .await;
            }
        }
    });
    let shellac = Shellac::start(addr, h2c).await;
    let mut child = Command::new(&python)
        .args(["-c", SCRIPT, &shellac.addr.port().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let mut stdin = child.stdin.take().expect("piped");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    assert_eq!(line(&mut lines).await, "reset");
    // Shellac has read the RST_STREAM (h2 handles it in the same poll) before the backend
    // sends more.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while shellac.stat("h2_rst_received").await < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reset never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The backend goes on: a second 103 and the answer, for a stream the client reset. The
    // fetch may already have been abandoned with its stream; either way nothing is sent on it.
    go.notify_one();
    tokio::time::timeout(Duration::from_secs(5), sent.notified())
        .await
        .expect("the origin sent the rest");
    stdin.write_all(b"go\n").await.unwrap();
    assert_eq!(line(&mut lines).await, "status 200");
    let after = line(&mut lines).await;
    assert_eq!(after, "after-first []", "nothing on the reset stream");
    assert_eq!(shellac.stat("client_interim").await, 1);
    shellac.stop().await;
    origin.abort();
}
