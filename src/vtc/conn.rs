//! A client's or server's connection (TCP, or a Unix socket: `stream.rs`): blocking reads in 100 ms slices so that a stopped
//! run (a failure elsewhere, the time limit) interrupts any wait, a read-ahead buffer, and
//! writes that give up when the run stops.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::context::{Halt, Shared};
use super::stream::Stream;

const SLICE: Duration = Duration::from_millis(100);

/// What a read that could not complete ran into.
#[derive(Debug)]
pub enum RxError {
    /// The peer closed the connection.
    Eof,
    /// Nothing came within the timeout.
    Timeout,
    /// The run is stopping.
    Stopped,
    Io(io::Error),
}

impl std::fmt::Display for RxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RxError::Eof => f.write_str("EOF"),
            RxError::Timeout => f.write_str("timeout"),
            RxError::Stopped => f.write_str("stopped"),
            RxError::Io(e) => write!(f, "{e}"),
        }
    }
}

pub struct Conn {
    shared: Arc<Shared>,
    stream: Stream,
    key: Option<u64>,
    /// Set when the entity owning the connection is stopped on its own (`server -break`).
    cancel: Option<Arc<AtomicBool>>,
    /// Bytes read but not consumed yet.
    buf: Vec<u8>,
    pos: usize,
}

impl Conn {
    pub fn new(shared: Arc<Shared>, stream: Stream, cancel: Option<Arc<AtomicBool>>) -> Conn {
        let _ = stream.set_read_timeout(Some(SLICE));
        let _ = stream.set_write_timeout(Some(SLICE));
        stream.set_nodelay();
        let key = shared.watch_socket(&stream);
        Conn {
            shared,
            stream,
            key,
            cancel,
            buf: Vec::new(),
            pos: 0,
        }
    }

    fn cancelled(&self) -> bool {
        self.shared.stopped()
            || self
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Acquire))
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The bytes buffered and not consumed.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Consumes `n` buffered bytes.
    pub fn consume(&mut self, n: usize) -> Vec<u8> {
        let end = (self.pos + n).min(self.buf.len());
        let out = self.buf[self.pos..end].to_vec();
        self.pos = end;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        out
    }

    /// Reads more bytes into the buffer, waiting at most `timeout`.
    pub fn fill(&mut self, timeout: Duration) -> Result<usize, RxError> {
        let end = Instant::now() + timeout;
        let mut chunk = [0u8; 16384];
        loop {
            if self.cancelled() {
                return Err(RxError::Stopped);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) if self.cancelled() => return Err(RxError::Stopped),
                Ok(0) => return Err(RxError::Eof),
                Ok(n) => {
                    if self.pos > 0 && self.pos == self.buf.len() {
                        self.buf.clear();
                        self.pos = 0;
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if Instant::now() >= end {
                        return Err(RxError::Timeout);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if self.cancelled() => return Err(RxError::Stopped),
                Err(e) => return Err(RxError::Io(e)),
            }
        }
    }

    /// Makes sure `n` bytes are buffered.
    pub fn need(&mut self, n: usize, timeout: Duration) -> Result<(), RxError> {
        while self.pending().len() < n {
            self.fill(timeout)?;
        }
        Ok(())
    }

    /// Writes all of `data`.
    pub fn send(&mut self, data: &[u8]) -> Result<(), Halt> {
        let mut off = 0;
        while off < data.len() {
            if self.cancelled() {
                return Err(Halt::Stopped);
            }
            if Instant::now() >= self.shared.deadline {
                return Err(Halt::Fail("Write failed: timeout".into()));
            }
            match self.stream.write(&data[off..]) {
                Ok(0) => return Err(Halt::Fail("Write failed: connection closed".into())),
                Ok(n) => off += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(Halt::Fail(format!("Write failed: {e}"))),
            }
        }
        Ok(())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shared.unwatch_socket(self.key);
    }
}
