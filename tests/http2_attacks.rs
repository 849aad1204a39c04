//! HTTP/2 attacks, each performed for real against the proxy on loopback: the attacking
//! connection is cut off (GOAWAY with the right code, or closed), the defence is counted,
//! another client keeps being answered, and the process's memory stays bounded.

mod common;

use std::time::Duration;

use common::h2::*;
use common::*;

const ENHANCE_YOUR_CALM: u32 = 0xb;
const CANCEL: u32 = 0x8;

/// Resident memory of this process (the proxy runs in it), in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// What an attack may add to the process's memory.
const BOUND_KIB: u64 = 64 * 1024;

fn origin_reply(s: &Seen) -> Reply {
    match s.path.as_str() {
        "/slow" => Reply::ok("slow")
            .cc("max-age=60")
            .delay(Duration::from_secs(3)),
        "/slowish" => Reply::ok("slowish").delay(Duration::from_millis(300)),
        "/big" => Reply::ok(&"x".repeat(1 << 20)).cc("max-age=60"),
        p => Reply::ok(&format!("body of {p}")).cc("max-age=60"),
    }
}

async fn start(tweak: impl FnOnce(&mut shellac::config::Config)) -> (Origin, Shellac) {
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.http2.h2c = shellac::config::http2::H2c::All;
        tweak(c);
    })
    .await;
    (origin, shellac)
}

/// Waits (bounded) until counter `name` is `want`: the watcher counts a frame right after
/// writing it, so a client may read it a moment before.
async fn counted(shellac: &Shellac, name: &str, want: u64) {
    for _ in 0..100 {
        if shellac.stat(name).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shellac.stat(name).await, want, "{name}");
}

/// Another client, on its own connection, is answered.
async fn others_are_served(shellac: &Shellac) {
    let r = h2_get(shellac.addr, "/other", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "body of /other");
    let r = get(shellac.addr, "/other").await;
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_is_cut_off_after_the_reset_budget() {
    let (origin, shellac) = start(|_| {}).await;
    let before = rss_kib();
    let mut raw = Raw::open(shellac.addr).await;
    let mut sent = 0;
    // Open a stream, reset it at once, 10,000 times (distinct URLs: each would be a fetch).
    for i in 0..10_000u32 {
        let id = 2 * i + 1;
        let block = request_block("GET", &format!("/slow?{i}"), &[]);
        let mut burst = frame(HEADERS, END_HEADERS | END_STREAM, id, &block);
        burst.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
        if !raw.send(&burst).await {
            break;
        }
        sent += 1;
    }
    assert_eq!(
        raw.goaway(Duration::from_secs(10)).await,
        Some(ENHANCE_YOUR_CALM)
    );
    assert!(sent < 10_000 || raw.closed(Duration::from_secs(5)).await);
    others_are_served(&shellac).await;
    counted(&shellac, "h2_rapid_reset", 1).await;
    // h2 cuts a burst off after 20 resets of streams hyper had not taken yet; ours after
    // `reset_budget` (100) of any.
    assert!(shellac.stat("h2_rst_received").await > 20);
    // Work started for at most the budget's worth of streams (plus those in flight).
    assert!(origin.count() <= 200, "{} backend requests", origin.count());
    assert!(
        rss_kib() < before + BOUND_KIB,
        "{} KiB → {} KiB",
        before,
        rss_kib()
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_you_reset_is_cut_off_after_the_reset_budget() {
    let (origin, shellac) = start(|c| c.http2.max_concurrent_streams = 10_000).await;
    let before = rss_kib();
    // Each stream is opened (a slow miss: a fetch starts), then made invalid by the client so
    // that the server must reset it: a WINDOW_UPDATE that overflows the stream's send window
    // (RFC 9113 §6.9.1: stream error FLOW_CONTROL_ERROR), a WINDOW_UPDATE of 0 (§6.9,
    // PROTOCOL_ERROR) or a PRIORITY frame of 4 bytes (§6.3, FRAME_SIZE_ERROR) — the last two
    // stream errors since vendor/h2/PATCHES.md §9, so they spend the same budget.
    type Provoke = fn(u32) -> Vec<u8>;
    let provokers: [(&str, Provoke); 3] = [
        ("window overflow", |id| {
            frame(WINDOW_UPDATE, 0, id, &0x7fff_ffffu32.to_be_bytes())
        }),
        ("WINDOW_UPDATE of 0", |id| {
            frame(WINDOW_UPDATE, 0, id, &[0; 4])
        }),
        ("PRIORITY of 4 bytes", |id| frame(PRIORITY, 0, id, &[0; 4])),
    ];
    for (n, (what, provoke)) in provokers.iter().enumerate() {
        let mut raw = Raw::open(shellac.addr).await;
        for i in 0..5_000u32 {
            let id = 2 * i + 1;
            let block = request_block("GET", &format!("/slow?{n}-{i}"), &[]);
            let mut burst = frame(HEADERS, END_HEADERS | END_STREAM, id, &block);
            burst.extend(provoke(id));
            if !raw.send(&burst).await {
                break;
            }
        }
        // Shellac's budget (100 resets written) or, when a burst is read at once, h2's bound
        // on resets it has scheduled (1,024): either way GOAWAY ENHANCE_YOUR_CALM, counted
        // the same.
        assert_eq!(
            raw.goaway(Duration::from_secs(10)).await,
            Some(ENHANCE_YOUR_CALM),
            "{what}"
        );
        others_are_served(&shellac).await;
        if *what == "PRIORITY of 4 bytes" {
            // PRIORITY frames also spend the control-frame budget (http2.control_frames_per_second):
            // whichever of the two runs out first ends the connection, as timing has it.
            let flood = shellac.stat("h2_control_flood").await;
            counted(&shellac, "h2_made_you_reset", n as u64 + 1 - flood).await;
            assert!(flood <= 1, "{what}: {flood} control floods");
        } else {
            counted(&shellac, "h2_made_you_reset", n as u64 + 1).await;
        }
    }
    assert!(origin.count() <= 600, "{} backend requests", origin.count());
    assert!(rss_kib() < before + BOUND_KIB);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_flood_is_cut_off() {
    let (_origin, shellac) = start(|_| {}).await;
    let mut raw = Raw::open(shellac.addr).await;
    let block = request_block("GET", "/c", &[]);
    raw.send(&frame(HEADERS, 0, 1, &block)).await;
    // Empty CONTINUATION frames that never end the block.
    let mut flood = Vec::new();
    for _ in 0..100_000 {
        flood.extend(frame(CONTINUATION, 0, 1, &[]));
    }
    raw.send(&flood).await;
    assert_eq!(
        raw.goaway(Duration::from_secs(10)).await,
        Some(ENHANCE_YOUR_CALM)
    );
    others_are_served(&shellac).await;
    counted(&shellac, "h2_continuation_flood", 1).await;
    // And a block that is large instead of long: one field whose value never ends.
    let mut raw = Raw::open(shellac.addr).await;
    let mut block = block.clone();
    block.extend_from_slice(&[0x00, 5]);
    block.extend_from_slice(b"x-big");
    // Value length 1,000,000 as an HPACK integer (7-bit prefix).
    let mut n = 1_000_000 - 127;
    block.push(0x7f);
    while n >= 128 {
        block.push((n % 128 + 128) as u8);
        n /= 128;
    }
    block.push(n as u8);
    raw.send(&frame(HEADERS, 0, 1, &block)).await;
    let big = frame(CONTINUATION, 0, 1, &vec![b'a'; 16_000]);
    for _ in 0..8 {
        if !raw.send(&big).await {
            break;
        }
    }
    assert_eq!(
        raw.goaway(Duration::from_secs(10)).await,
        Some(ENHANCE_YOUR_CALM)
    );
    counted(&shellac, "h2_continuation_flood", 2).await;
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_block_that_never_ends_times_out() {
    let (_origin, shellac) = start(|c| {
        c.server.header_read_timeout = shellac::config::units::Dur(Duration::from_millis(300));
    })
    .await;
    let mut raw = Raw::open(shellac.addr).await;
    raw.send(&frame(HEADERS, 0, 1, &request_block("GET", "/c", &[])))
        .await;
    assert!(raw.closed(Duration::from_secs(10)).await);
    assert_eq!(shellac.stat("client_header_timeout").await, 1);
    others_are_served(&shellac).await;
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpack_bomb_is_refused_with_memory_bounded() {
    let (origin, shellac) = start(|_| {}).await;
    let before = rss_kib();
    let mut raw = Raw::open(shellac.addr).await;
    // One 4,000-byte field into the dynamic table (literal with incremental indexing), then
    // 10,000 one-byte references to it: 40 MB decoded from a 14 KB block.
    let mut block = request_block("GET", "/bomb", &[]);
    block.push(0x40);
    block.push(5);
    block.extend_from_slice(b"x-big");
    block.push(0x7f);
    let mut n = 4000 - 127;
    while n >= 128 {
        block.push((n % 128 + 128) as u8);
        n /= 128;
    }
    block.push(n as u8);
    block.extend(std::iter::repeat_n(b'a', 4000));
    block.extend(std::iter::repeat_n(0x80 | 62, 10_000));
    let mut frames = frame(HEADERS, 0, 1, &block[..16_000.min(block.len())]);
    let mut rest = &block[16_000.min(block.len())..];
    while !rest.is_empty() {
        let take = rest.len().min(16_000);
        let flags = if take == rest.len() {
            END_HEADERS | END_STREAM
        } else {
            0
        };
        frames.extend(frame(CONTINUATION, flags, 1, &rest[..take]));
        rest = &rest[take..];
    }
    raw.send(&frames).await;
    // Refused: the stream (431 or a reset) or the connection.
    let answer = raw
        .until(Duration::from_secs(10), |f| {
            matches!(f.kind, GOAWAY | RST_STREAM) || (f.kind == HEADERS && f.stream == 1)
        })
        .await;
    if let Some(f) = &answer
        && f.kind == HEADERS
    {
        // A header answer: must not be a success.
        assert!(!f.payload.is_empty());
    }
    assert_eq!(origin.count_path("/bomb"), 0, "never forwarded");
    others_are_served(&shellac).await;
    counted(&shellac, "h2_hpack_bomb", 1).await;
    assert!(rss_kib() < before + BOUND_KIB);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_and_ping_floods_are_cut_off() {
    let (_origin, shellac) = start(|_| {}).await;
    for (kind, payload) in [(SETTINGS, Vec::new()), (PING, vec![0u8; 8])] {
        let before = rss_kib();
        let one = frame(kind, 0, 0, &payload);
        let flood: Vec<u8> = std::iter::repeat_n(one, 20_000).flatten().collect();
        // Sent without reading the acknowledgements first; the server's frames are read
        // meanwhile, up to the end of the connection.
        let seen = flood_and_read(shellac.addr, flood, Duration::from_secs(10)).await;
        let frames = frames_of(&seen);
        let last = frames.last().expect("frames");
        assert_eq!(last.kind, GOAWAY, "GOAWAY last");
        assert_eq!(last.code(), Some(ENHANCE_YOUR_CALM));
        others_are_served(&shellac).await;
        assert!(rss_kib() < before + BOUND_KIB);
    }
    counted(&shellac, "h2_control_flood", 2).await;
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_of_empty_and_tiny_data_frames_are_cut_off() {
    let (origin, shellac) = start(|_| {}).await;
    let before = rss_kib();
    // Empty DATA frames without END_STREAM: h2 takes 100 per connection.
    let mut raw = Raw::open(shellac.addr).await;
    let block = request_block("POST", "/upload", &[]);
    raw.send(&frame(HEADERS, END_HEADERS, 1, &block)).await;
    let mut flood = Vec::new();
    for _ in 0..20_000 {
        flood.extend(frame(DATA, 0, 1, &[]));
    }
    raw.send(&flood).await;
    assert_eq!(
        raw.goaway(Duration::from_secs(10)).await,
        Some(ENHANCE_YOUR_CALM)
    );
    counted(&shellac, "h2_data_flood", 1).await;
    // One-byte DATA frames on a request whose body nobody reads (a GET's body is never
    // forwarded) while its slow miss is fetched: h2's small-frame budget.
    let mut raw = Raw::open(shellac.addr).await;
    let block = request_block("GET", "/slow?tiny", &[]);
    raw.send(&frame(HEADERS, END_HEADERS, 1, &block)).await;
    let mut flood = Vec::new();
    for _ in 0..200_000 {
        flood.extend(frame(DATA, 0, 1, b"x"));
    }
    raw.send(&flood).await;
    let code = raw.goaway(Duration::from_secs(10)).await;
    assert_eq!(code, Some(ENHANCE_YOUR_CALM));
    counted(&shellac, "h2_data_flood", 2).await;
    others_are_served(&shellac).await;
    assert!(rss_kib() < before + BOUND_KIB);
    drop(origin);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_with_many_streams_are_closed() {
    let (_origin, shellac) = start(|c| {
        c.server.send_timeout = shellac::config::units::Dur(Duration::from_millis(500));
    })
    .await;
    // The object is cached first.
    assert_eq!(h2_get(shellac.addr, "/big", &[]).await.body.len(), 1 << 20);
    let before = rss_kib();
    // A client that grants no flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0) and asks
    // for the 1 MiB object on 100 streams.
    let mut stream = tokio::net::TcpStream::connect(shellac.addr).await.unwrap();
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]));
    for i in 0..100u32 {
        let block = request_block("GET", "/big", &[]);
        hello.extend(frame(HEADERS, END_HEADERS | END_STREAM, 2 * i + 1, &block));
    }
    use tokio::io::AsyncWriteExt;
    stream.write_all(&hello).await.unwrap();
    let mut raw = Raw::from_stream(stream);
    assert!(
        raw.closed(Duration::from_secs(20)).await,
        "closed by send_timeout"
    );
    assert_eq!(shellac.stat("h2_slow_reader").await, 1);
    others_are_served(&shellac).await;
    assert!(rss_kib() < before + BOUND_KIB);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_over_the_limit_are_refused_and_max_requests_ends_the_connection() {
    let (_origin, shellac) = start(|c| {
        c.http2.max_concurrent_streams = 2;
        c.http2.max_requests = 4;
    })
    .await;
    let mut raw = Raw::open(shellac.addr).await;
    // The server's SETTINGS acknowledged ours: its limits apply from here.
    raw.until(Duration::from_secs(5), |f| {
        f.kind == SETTINGS && f.flags & ACK != 0
    })
    .await;
    for id in [1, 3, 5] {
        raw.get(id, "/slowish").await;
    }
    let mut ended = Vec::new();
    let mut refused = None;
    while ended.len() < 2 {
        let f = raw
            .until(Duration::from_secs(10), |f| {
                f.kind == RST_STREAM || (f.kind == DATA && f.flags & END_STREAM != 0)
            })
            .await
            .expect("frames");
        if f.kind == RST_STREAM {
            refused = Some(f);
        } else {
            ended.push(f.stream);
        }
    }
    let refused = refused.expect("the third stream is refused");
    assert_eq!(refused.stream, 5);
    assert_eq!(refused.code(), Some(0x7), "REFUSED_STREAM");
    // Two more: the fourth stream the service saw ends the connection (GOAWAY NO_ERROR).
    for id in [7, 9] {
        raw.get(id, "/quick").await;
    }
    assert_eq!(raw.goaway(Duration::from_secs(10)).await, Some(0));
    assert_eq!(shellac.stat("h2_max_requests").await, 1);
    shellac.stop().await;
}
