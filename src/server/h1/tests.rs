//! The gate's unit tests: clocks, lingering close, release, fast answers, stand-ins.

use super::*;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use std::task::Waker;

use crate::http::strict::Violation;
use crate::proxy::{FastAnswer, ResponseBody};

use super::conn::PHASE_IDLE;

impl Quiet for tokio::io::DuplexStream {
    fn quiet(&mut self) -> bool {
        true
    }
}

#[test]
fn slow_body_allowance() {
    let s = ConnState::new();
    // Not waiting: never too slow.
    assert!(!s.body_too_slow(1_000_000, 1000, 100));
    s.body_wait_since.store(10_000, Ordering::Relaxed);
    // One stretch longer than the timeout.
    assert!(!s.body_too_slow(10_900, 1000, 0));
    assert!(s.body_too_slow(11_001, 1000, 0));
    // Total waiting beyond timeout + bytes/rate.
    s.body_waited_ms.store(1_500, Ordering::Relaxed);
    s.body_bytes.store(100, Ordering::Relaxed); // earns 1000 ms at 100 B/s
    assert!(!s.body_too_slow(10_400, 1000, 100)); // 1500 + 400 <= 1000 + 1000
    assert!(s.body_too_slow(10_600, 1000, 100)); // 1500 + 600 > 2000
    s.body_received(10);
    assert_eq!(s.body_wait_since.load(Ordering::Relaxed), 0);
}

/// The marks of one poll (a head arriving, an answer's first write, idle again) share one
/// read of the coarse clock; the next poll reads it again.
#[test]
fn one_poll_reads_the_coarse_clock_once() {
    let mut clock = PollClock::default();
    let s = ConnState::new();
    s.phase.store(PHASE_IDLE, Ordering::Relaxed);
    s.bytes_arrived(&mut clock);
    let first = s.since_ms.load(Ordering::Relaxed);
    assert!(first > 0);
    std::thread::sleep(std::time::Duration::from_millis(40));
    s.response_begins();
    conn::note_write(&s, true, &mut clock);
    assert_eq!(s.send_started.load(Ordering::Relaxed), first);
    assert_eq!(s.write_blocked_since.load(Ordering::Relaxed), first);
    clock.clear();
    conn::note_write(&s, false, &mut clock);
    assert_eq!(s.write_blocked_since.load(Ordering::Relaxed), 0);
    s.response_begins();
    conn::note_write(&s, false, &mut clock);
    // A sleep of 40 ms is at least 40 ms; the coarse clock may lag by a tick (<= 10 ms).
    assert!(s.send_started.load(Ordering::Relaxed) >= first + 20);
}

/// An error answered with a close (`linger_on_close`): shutdown sends FIN, then reads what
/// the client still sends until it closes. Without it, shutdown returns at once.
#[tokio::test]
async fn error_close_lingers_until_the_client_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    for linger in [false, true] {
        let (server, mut client) = tokio::io::duplex(64);
        let state = Arc::new(ConnState::new());
        if linger {
            state.linger_on_close();
        }
        let counters = Arc::new(Counters::default());
        let mut gate = Gate::new(server, state, counters, Limits::default());
        // The client's request is still on its way when the answer ends with a close.
        client.write_all(&[b'x'; 64]).await.unwrap();
        client.shutdown().await.unwrap();
        gate.shutdown().await.unwrap();
        let mut end = [0u8; 1];
        assert_eq!(
            client.read(&mut end).await.unwrap(),
            0,
            "FIN after the answer"
        );
        if linger {
            assert_eq!(
                gate.lingered, 64,
                "read and discarded until the client closed"
            );
        } else {
            assert_eq!(gate.lingered, 0);
            assert!(gate.linger.is_none(), "no lingering without an error");
        }
    }
}

/// A release happens at an idle read only: never while a write to the client is blocked
/// (hyper still holds response bytes) or a head is partly held; then the socket is handed
/// back and the reader sees the end of the stream.
#[tokio::test]
async fn release_only_when_idle_and_nothing_is_unwritten() {
    use std::future::poll_fn;
    let (server, _client) = tokio::io::duplex(64);
    let state = Arc::new(ConnState::new());
    let counters = Arc::new(Counters::default());
    let mut gate = Gate::new(server, state.clone(), counters, Limits::default());
    let mut released = gate.releasable();
    let mut buf = [0u8; 16];
    let mut read_once = |gate: &mut Gate<_>| {
        let mut rb = ReadBuf::new(&mut buf);
        let mut cx = Context::from_waker(Waker::noop());
        let polled = Pin::new(gate).poll_read(&mut cx, &mut rb);
        (polled.is_ready(), rb.filled().len())
    };
    // A new connection waits for its first head: not idle.
    state.want_release();
    assert_eq!(read_once(&mut gate), (false, 0));
    assert!(released.try_recv().is_err());
    // Idle, but a response write is blocked.
    state.phase.store(PHASE_IDLE, Ordering::Relaxed);
    state.write_blocked_since.store(1, Ordering::Relaxed);
    state.want_release();
    assert_eq!(read_once(&mut gate), (false, 0));
    assert!(released.try_recv().is_err());
    // Idle with everything written: released, and hyper reads an end of stream.
    state.write_blocked_since.store(0, Ordering::Relaxed);
    state.want_release();
    assert_eq!(read_once(&mut gate), (true, 0));
    assert!(released.try_recv().is_ok(), "socket handed back");
    assert_eq!(
        read_once(&mut gate),
        (true, 0),
        "still the end of the stream"
    );
    // Shutting a released gate down leaves the socket alone.
    poll_fn(|cx| Pin::new(&mut gate).poll_shutdown(cx))
        .await
        .unwrap();
}

/// Answers every request with a fixed head and no body.
struct Fixed;
impl Answerer for Fixed {
    fn answer(&mut self, _head: &[u8], _parts: &Parts) -> Option<FastAnswer> {
        Some(FastAnswer {
            head: Bytes::from_static(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
            add_date: false,
            body: ResponseBody::empty(),
        })
    }
}

/// A fast answer is written only while hyper holds nothing: after hyper wrote without
/// flushing, or while its request is in flight, the next head goes to hyper; once hyper
/// flushed with nothing in flight, heads are answered again (and never reach hyper).
#[tokio::test]
async fn fast_answers_never_overtake_hyper() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: a\r\n\r\n";
    let (server, mut client) = tokio::io::duplex(4096);
    let state = Arc::new(ConnState::new());
    let counters = Arc::new(Counters::default());
    let mut gate = Gate::new(server, state.clone(), counters, Limits::default());
    gate.answer_with(Box::new(Fixed));
    let mut buf = [0u8; 256];
    let mut read_once = |gate: &mut Gate<_>| {
        let mut rb = ReadBuf::new(&mut buf);
        let mut cx = Context::from_waker(Waker::noop());
        let _ = Pin::new(gate).poll_read(&mut cx, &mut rb);
        rb.filled().len()
    };
    // Answered by the gate: hyper reads nothing, the client gets the answer.
    client.write_all(GET).await.unwrap();
    assert_eq!(read_once(&mut gate), 0);
    let mut got = [0u8; 38];
    client.read_exact(&mut got).await.unwrap();
    assert!(got.starts_with(b"HTTP/1.1 200 OK"));
    // hyper wrote something it has not flushed: the next head is hyper's.
    gate.write_all(b"x").await.unwrap();
    client.write_all(GET).await.unwrap();
    assert_eq!(read_once(&mut gate), GET.len(), "handed to hyper");
    let _ = state.begin_request();
    // hyper flushes while its request is still in flight: still hyper's turn.
    gate.flush().await.unwrap();
    client.write_all(GET).await.unwrap();
    assert_eq!(read_once(&mut gate), GET.len());
    let _ = state.begin_request();
    state.end_request();
    state.end_request();
    // Everything dispatched, nothing in flight, flushed: the gate answers again.
    gate.flush().await.unwrap();
    client.write_all(GET).await.unwrap();
    assert_eq!(read_once(&mut gate), 0);
    let mut x = [0u8; 1];
    client.read_exact(&mut x).await.unwrap();
    assert_eq!(&x, b"x", "hyper's byte first");
    client.read_exact(&mut got).await.unwrap();
    assert!(got.starts_with(b"HTTP/1.1 200 OK"));
}

#[test]
fn stand_in_is_recognised_by_number() {
    let s = ConnState::new();
    s.reject
        .store(Violation::DuplicateHost as u8, Ordering::Relaxed);
    s.reject_at.store(1, Ordering::Relaxed);
    assert_eq!(s.begin_request().refused, None);
    assert_eq!(s.begin_request().refused, Some(Violation::DuplicateHost));
}

/// Answers every request with its stored body (a mapping of its own: it goes out through
/// the connection's pipe, `splice.rs`).
struct Stored(Bytes);
impl Answerer for Stored {
    fn answer(&mut self, _head: &[u8], _parts: &Parts) -> Option<FastAnswer> {
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n",
            self.0.len()
        );
        Some(FastAnswer {
            head: Bytes::from(head),
            add_date: false,
            body: ResponseBody::full(self.0.clone()),
        })
    }
}

/// Regression (4e2c906): a lone fast answer whose last bytes went into the connection's pipe
/// while the socket was full is popped from the queue with the pipe still holding them; the
/// lean loop must send them on once the socket takes more, though no answer is queued and the
/// client sends nothing more. Before the fix `poll_lean` only read (pending for ever) and the
/// body stayed short until the send timeout. Deterministic: the client reads nothing until
/// the gate is in that state (asserted), then reads with the lean loop running on wake-ups.
#[tokio::test]
async fn the_lean_loop_sends_what_a_popped_answer_left_in_the_pipe() {
    use std::future::poll_fn;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const BODY: usize = 100_000;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut client = socket
        .connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    socket2::SockRef::from(&server)
        .set_send_buffer_size(4096)
        .unwrap();
    let data: Vec<u8> = (0..BODY).map(|i| (i % 251) as u8).collect();
    let body = crate::cache::body::one(&[Bytes::from(data.clone())], BODY);
    let state = Arc::new(ConnState::new());
    let counters = Arc::new(Counters::default());
    let mut gate = Gate::new(server, state, counters.clone(), Limits::default());
    gate.answer_with(Box::new(Stored(body)));
    client
        .write_all(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    // The answer written until it is popped with bytes left in the pipe: the client reads
    // only while the answer is still queued (a pipe smaller than the body needs it to).
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 65_536];
    let mut reached = false;
    for _ in 0..500 {
        let mut cx = Context::from_waker(Waker::noop());
        assert!(gate.poll_lean(&mut cx).is_pending(), "nothing for hyper");
        if gate.out.is_empty() && gate.splice.holds() {
            reached = true;
            break;
        }
        if !gate.out.is_empty()
            && let Ok(n) = client.try_read(&mut chunk)
        {
            got.extend_from_slice(&chunk[..n]);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(reached, "the answer popped, its last bytes in the pipe");
    assert!(counters.splice_bytes.get() > 0, "the body went by the pipe");
    // The client reads on; the lean loop runs on its own wake-ups (bounded: a stall is the
    // failure, it never ends by itself).
    let total = format!("HTTP/1.1 200 OK\r\ncontent-length: {BODY}\r\n\r\n").len() + BODY;
    let read_all = async {
        while got.len() < total {
            let n = client.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the connection ended early");
            got.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::select! {
        turn = poll_fn(|cx| gate.poll_lean(cx)) => panic!("the lean loop ended: {turn:?}"),
        done = tokio::time::timeout(std::time::Duration::from_secs(20), read_all) => {
            assert!(done.is_ok(), "the pipe's last bytes were never sent");
        }
    }
    let at = total - BODY;
    assert!(got[..at].starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(got[at..] == data[..], "the body whole, byte for byte");
}
