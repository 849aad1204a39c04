//! The hardening corpus (issue 5): request smuggling, cache poisoning and resource limits,
//! one file per class. Every vector is sent over a raw TCP connection to the real proxy in
//! front of a recording origin that keeps the exact bytes it received; each states the status
//! the client gets, whether the connection is closed, and what reached the origin.

#[path = "../common/mod.rs"]
mod common;

mod deception;
mod framing;
mod headers;
mod hop_by_hop;
mod key_normalisation;
mod limits;
mod logging;
mod mutations;
mod poisoning;
mod range;
mod responses;
mod slow_clients;
mod upgrade;

use std::time::Duration;

use common::raw_origin::RawOrigin;
use common::*;

/// One vector: bytes to send and what must happen.
pub struct Vector {
    pub name: String,
    pub send: Vec<u8>,
    /// Statuses of the responses, in order.
    pub statuses: Vec<u16>,
    /// The server closed the connection after them.
    pub closed: bool,
    /// Requests the origin received because of this vector.
    pub forwarded: usize,
}

impl Vector {
    pub fn new(name: impl Into<String>, send: impl AsRef<[u8]>) -> Vector {
        Vector {
            name: name.into(),
            send: send.as_ref().to_vec(),
            statuses: Vec::new(),
            closed: true,
            forwarded: 0,
        }
    }

    /// Refused before anything reached the origin, connection closed.
    pub fn refused(name: impl Into<String>, send: impl AsRef<[u8]>, status: u16) -> Vector {
        Vector {
            statuses: vec![status],
            ..Vector::new(name, send)
        }
    }

    pub fn expect(mut self, statuses: &[u16], forwarded: usize) -> Vector {
        self.statuses = statuses.to_vec();
        self.forwarded = forwarded;
        self
    }
}

/// A proxy in front of a recording origin.
pub struct Bench {
    pub shellac: Shellac,
    pub origin: RawOrigin,
}

impl Bench {
    pub async fn start() -> Bench {
        Bench::with(|_| {}).await
    }

    pub async fn with(tweak: impl FnOnce(&mut shellac::config::Config)) -> Bench {
        let origin = RawOrigin::ok().await;
        let shellac = Shellac::start(origin.addr, tweak).await;
        Bench { shellac, origin }
    }

    /// Runs `v` and returns a description of every way it differed from its expectation.
    pub async fn check(&self, v: &Vector) -> Option<String> {
        let before = self.origin.count();
        let got = exchange(self.shellac.addr, &v.send, Duration::from_secs(3)).await;
        // A forwarded request is answered before the client sees the response, so the
        // origin's count is final here.
        let forwarded = self.origin.count() - before;
        let statuses = got.statuses();
        if statuses != v.statuses || got.closed != v.closed || forwarded != v.forwarded {
            Some(format!(
                "{}: want statuses {:?} closed {} forwarded {}, got {:?} closed {} forwarded {}\n{}",
                v.name,
                v.statuses,
                v.closed,
                v.forwarded,
                statuses,
                got.closed,
                forwarded,
                got.text.lines().next().unwrap_or("")
            ))
        } else {
            None
        }
    }

    /// Runs every vector and fails with the list of those that did not behave.
    pub async fn run(&self, vectors: &[Vector]) {
        let mut failures = Vec::new();
        for v in vectors {
            if let Some(f) = self.check(v).await {
                failures.push(f);
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} vectors failed:\n{}",
            failures.len(),
            vectors.len(),
            failures.join("\n")
        );
    }

    pub async fn stop(self) {
        self.shellac.stop().await;
        self.origin.stop();
    }
}

/// A request that must never be seen by the origin if framing is handled right; appended
/// after a vector to catch "good request after bad" and smuggled prefixes.
pub const AFTER: &str = "GET /after HTTP/1.1\r\nHost: a\r\n\r\n";

/// `head` + blank line + `body`, then the pipelined [`AFTER`].
pub fn with_after(head: &str, body: &str) -> String {
    format!("{head}\r\n{body}{AFTER}")
}
