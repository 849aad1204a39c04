//! Heap held by idle HTTP/2 connections (issue 20): a counting allocator measures the live
//! bytes that many connections add once each had a request answered and went silent. h2 is
//! patched (vendor/h2/PATCHES.md §3, §6) so that such a connection holds no read, write or
//! scratch buffer (those were 16 + 8 + 4 KiB each); what remains is its state.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use common::h2::*;
use common::*;

/// The system allocator, counting the bytes currently allocated (the whole process: the
/// test's clients and the in-process Shellac).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is only
// bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout (alloc above).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as for dealloc; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Connections held open at once.
const CONNS: usize = 200;

/// Bytes of heap one idle connection may add (Shellac's side and the test client's). Measured
/// ~5.4 KiB in a debug build: the connection task with its boxed HTTP/2 session (hyper's and
/// h2's connection, the frame watcher, the session loop: ~3 KiB), h2's stream table and HPACK
/// decoder table, the sockets' registrations, the client's buffer. Before, h2's buffers alone
/// added 28 KiB, and the task carried the TLS branch's size (another ~3.5 KiB); the HPACK
/// encoder's table (~0.5 KiB here, released since PATCHES.md §6) took it to ~5.9 KiB.
const BOUND: isize = 6656;

async fn answered(raw: &mut Raw, stream: u32) {
    raw.get(stream, "/idle").await;
    let end = raw
        .until(Duration::from_secs(10), |f| {
            f.stream == stream && f.flags & END_STREAM != 0 && matches!(f.kind, HEADERS | DATA)
        })
        .await;
    assert!(end.is_some(), "no answer on stream {stream}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_hold_no_buffers() {
    let origin = Origin::start(|_| Reply::ok(&"x".repeat(100)).cc("max-age=60")).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.http2.h2c = shellac::config::http2::H2c::All;
    })
    .await;
    // Warm up: the object cached, the runtime's and the allocator's first allocations made.
    for _ in 0..20 {
        let mut raw = Raw::open(shellac.addr).await;
        answered(&mut raw, 1).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = LIVE.load(Ordering::Relaxed);
    let mut held = Vec::with_capacity(CONNS);
    for _ in 0..CONNS {
        let mut raw = Raw::open(shellac.addr).await;
        answered(&mut raw, 1).await;
        held.push(raw);
    }
    // The buffers are freed when each connection's last write completes and its next read
    // finds nothing: soon after the answer, on the server's tasks. Bounded wait.
    let mut per_conn = isize::MAX;
    for _ in 0..100 {
        per_conn = (LIVE.load(Ordering::Relaxed) - before) / CONNS as isize;
        if per_conn < BOUND {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("live heap per idle HTTP/2 connection (server + client): {per_conn} bytes");
    assert!(
        per_conn < BOUND,
        "{per_conn} bytes per idle connection (bound {BOUND})"
    );
    // They still work: a second request on each of a few of them.
    for raw in held.iter_mut().take(5) {
        answered(raw, 3).await;
    }
    drop(held);
    shellac.stop().await;
}
