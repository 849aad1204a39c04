//! The HPACK encoder's dynamic table is dropped while an HTTP/2 connection is idle
//! (vendor/h2/PATCHES.md §6): the next response's header block begins with Dynamic Table Size
//! Updates to 0 and back (RFC 7541 §4.2, §6.3), so the client's decoder evicts exactly what
//! the server forgot. Checked with an HPACK decoder Shellac does not share — Python's `hpack`
//! (python3-h2) — over several requests on one connection with idle gaps between them: every
//! response's fields decode to what the origin sent, and after each gap the client's table
//! holds only fields of the latest response.

use std::time::Duration;

use crate::common::*;
use tokio::process::Command;

/// The client: sequential GETs with idle gaps, then two at once; asserts in Python and prints
/// "ok" (or what went wrong).
const SCRIPT: &str = r#"
import socket, sys, time
import h2.connection, h2.config, h2.events
port, rounds = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
s.sendall(c.data_to_send())

def fetch(paths):
    ids = {}
    for p in paths:
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "GET"), (":scheme", "http"),
                             (":authority", "hpack.test"), (":path", p)], end_stream=True)
        ids[sid] = {"headers": None, "body": b""}
    s.sendall(c.data_to_send())
    left = set(ids)
    while left:
        data = s.recv(65536)
        assert data, "connection closed"
        for e in c.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived):
                ids[e.stream_id]["headers"] = dict(e.headers)
            elif isinstance(e, h2.events.DataReceived):
                ids[e.stream_id]["body"] += e.data
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.StreamEnded):
                left.discard(e.stream_id)
            elif isinstance(e, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                raise AssertionError(f"unexpected {e}")
        s.sendall(c.data_to_send())
    return [ids[k] for k in sorted(ids)]

def check(resp, path):
    h = resp["headers"]
    assert h[":status"] == "200", h
    assert resp["body"] == ("body of " + path).encode(), resp["body"]
    for i in range(6):
        want = f"value {i} of {path}, long enough to be worth indexing"
        assert h.get(f"x-field-{i}") == want, (i, h)
    assert h.get("content-type") == "text/x-hpack-test", h
    assert "hit" in h.get("cache-status", "") or "miss" in h.get("cache-status", ""), h

def table():
    return [(bytes(n), bytes(v)) for n, v in c.decoder.header_table.dynamic_entries]

cleared = 0
for r in range(rounds):
    path = f"/p{r % 2}"
    [resp] = fetch([path])
    check(resp, path)
    sent = set()
    for n, v in resp["headers"].items():
        sent.add((n.encode(), v.encode()))
    entries = table()
    assert entries, "the server indexed nothing"
    if all(e in sent for e in entries):
        cleared += 1
    else:
        print(f"round {r}: {len(entries)} entries, not all of this response", file=sys.stderr)
    time.sleep(1.0)  # idle_release is 100 ms
# Two at once: the table is kept between them (the connection is not idle).
for resp, path in zip(fetch(["/p0", "/p1"]), ["/p0", "/p1"]):
    check(resp, path)
# Each round after the first follows an idle gap; the first begins with an empty table.
assert cleared == rounds, f"the table was emptied after {cleared} of {rounds} rounds"
print("ok")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpack_table_dropped_while_idle_keeps_the_client_decoder_in_step() {
    let Some(python) = tools::require(tools::python_with_h2().await, "python3-h2", "python3-h2")
    else {
        return;
    };
    let origin = Origin::start(|s| {
        let mut reply = Reply::ok(&format!("body of {}", s.path))
            .cc("max-age=60")
            .header("content-type", "text/x-hpack-test");
        for i in 0..6 {
            reply = reply.header(
                &format!("x-field-{i}"),
                &format!("value {i} of {}, long enough to be worth indexing", s.path),
            );
        }
        reply
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.http2.h2c = shellac::config::http2::H2c::All;
        c.server.idle_release = shellac::config::units::Dur(Duration::from_millis(100));
    })
    .await;
    let run = Command::new(&python)
        .args(["-c", SCRIPT, &shellac.addr.port().to_string(), "5"])
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the client finishes")
        .expect("python runs");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    shellac.stop().await;
}
