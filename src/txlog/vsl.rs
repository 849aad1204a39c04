//! Varnish-style log records (VSL) kept in memory: what a request under a VCL program did, one
//! record per fact — `Begin`, `ReqURL`, `ReqHeader`, `VCL_call`, `VCL_return`, `BereqURL`,
//! `BerespStatus`, `ESI_xmlerror`, `End`, ... — with the transaction id (`vxid`) Varnish would
//! give it, for `GET /vsl` (varnishtest's `logexpect` in `shellac vtc`, and debugging).
//!
//! Off by default (`log.vsl_records = 0`): then the request path never reaches this file. When
//! on, each record takes a lock and an allocation — a tool for tests and debugging, not for
//! production traffic (the access log, `record.rs`, is the lock-free log). The newest
//! `capacity` records are kept; older ones are dropped.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Which side of the proxy a record belongs to: Varnish's `c` (client), `b` (backend), `-`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Backend,
    None,
}

impl Side {
    fn letter(self) -> char {
        match self {
            Side::Client => 'c',
            Side::Backend => 'b',
            Side::None => '-',
        }
    }
}

/// One record.
#[derive(Clone, Debug)]
struct Entry {
    seq: u64,
    vxid: u64,
    side: Side,
    tag: &'static str,
    data: String,
}

#[derive(Default)]
struct Ring {
    /// The sequence number the next record takes (the first is 1).
    next: u64,
    entries: VecDeque<Entry>,
}

/// The process's records (kept across reloads, like the transaction ids).
#[derive(Default)]
pub struct Vsl {
    capacity: AtomicUsize,
    ring: Mutex<Ring>,
}

impl Vsl {
    /// Keeps the newest `records` records from now on (0: none).
    pub fn set_capacity(&self, records: usize) {
        self.capacity.store(records, Ordering::Relaxed);
    }

    /// Whether records are kept.
    pub fn enabled(&self) -> bool {
        self.capacity.load(Ordering::Relaxed) > 0
    }

    /// Adds a record for transaction `vxid`.
    pub fn log(&self, vxid: u64, side: Side, tag: &'static str, data: impl Into<String>) {
        let capacity = self.capacity.load(Ordering::Relaxed);
        if capacity == 0 {
            return;
        }
        let data = data.into();
        let Ok(mut ring) = self.ring.lock() else {
            return;
        };
        ring.next = ring.next.max(1);
        let seq = ring.next;
        ring.next += 1;
        while ring.entries.len() >= capacity {
            ring.entries.pop_front();
        }
        ring.entries.push_back(Entry {
            seq,
            vxid,
            side,
            tag,
            data,
        });
    }

    /// The records after sequence number `after` (0: all kept), one a line: `SEQ VXID SIDE
    /// TAG DATA` (a record's line breaks and backslashes escaped as `\n`, `\\`); and the
    /// sequence number of the last record (`after` when there is none newer).
    pub fn since(&self, after: u64) -> (String, u64) {
        let mut out = String::new();
        let Ok(ring) = self.ring.lock() else {
            return (out, after);
        };
        let mut last = after;
        for e in ring.entries.iter().filter(|e| e.seq > after) {
            let _ = write!(out, "{} {} {} {} ", e.seq, e.vxid, e.side.letter(), e.tag);
            for c in e.data.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    c => out.push(c),
                }
            }
            out.push('\n');
            last = e.seq;
        }
        (out, last)
    }
}

/// One transaction's records: [`Transaction::begin`] logs its `Begin`, dropping the last holder
/// logs its `End` — so a backend fetch whose body a filter still reads (ESI's parse, which logs
/// `ESI_xmlerror` at the body's end) ends after it, as Varnish's does.
#[derive(Debug)]
pub struct Transaction {
    vsl: Arc<Vsl>,
    pub vxid: u64,
    pub side: Side,
    at_end: Mutex<Vec<(&'static str, String)>>,
}

impl Transaction {
    /// Logs `Begin KIND PARENT REASON` (`req 1000 rxreq`, `bereq 1001 fetch`).
    pub fn begin(
        vsl: Arc<Vsl>,
        vxid: u64,
        side: Side,
        (kind, parent, reason): (&str, u64, &str),
    ) -> Transaction {
        vsl.log(vxid, side, "Begin", format!("{kind} {parent} {reason}"));
        Transaction {
            vsl,
            vxid,
            side,
            at_end: Mutex::default(),
        }
    }

    /// Logs a record of this transaction.
    pub fn log(&self, tag: &'static str, data: impl Into<String>) {
        self.vsl.log(self.vxid, self.side, tag, data);
    }

    /// Logs a `Name: value` record per field (`ReqHeader`, `BerespHeader`, ...).
    pub fn headers(&self, tag: &'static str, headers: &http::HeaderMap) {
        for (name, value) in headers {
            self.log(tag, field_line(name, value));
        }
    }

    /// A record logged when the transaction ends, just before its `End` (a fetch's
    /// `BackendClose`: its connection may go back before the body's last filter is done).
    pub fn log_at_end(&self, tag: &'static str, data: impl Into<String>) {
        if let Ok(mut e) = self.at_end.lock() {
            e.push((tag, data.into()));
        }
    }
}

/// A field as a `Name: value` record writes it: the name in its usual capitalisation
/// (`Content-Length`, `X-Varnish`) — Shellac keeps names in lower case, as HTTP/2 writes
/// them; Varnish logs them as the sender wrote them, which is nearly always this.
pub fn field_line(name: &http::HeaderName, value: &http::HeaderValue) -> String {
    let mut out = String::with_capacity(name.as_str().len() + value.len() + 2);
    let mut upper = true;
    for c in name.as_str().chars() {
        out.push(if upper { c.to_ascii_uppercase() } else { c });
        upper = c == '-';
    }
    out.push_str(": ");
    out.push_str(&String::from_utf8_lossy(value.as_bytes()));
    out
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if let Ok(mut e) = self.at_end.lock() {
            for (tag, data) in e.drain(..) {
                self.vsl.log(self.vxid, self.side, tag, data);
            }
        }
        self.vsl.log(self.vxid, self.side, "End", "");
    }
}

/// Which records a request writes to, for code that has the request but not its VCL state (a
/// request extension: the ESI assembly logs its `VCL_Error`s there, and gives its includes'
/// `Begin` their parent). Holding it keeps the transaction from ending: an assembled page's
/// request ends when its last include's does.
#[derive(Clone, Debug)]
pub struct Current(pub Arc<Transaction>);

impl std::fmt::Debug for Vsl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vsl")
            .field("capacity", &self.capacity.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kept_in_order_and_bounded() {
        let vsl = Vsl::default();
        vsl.log(1001, Side::Client, "ReqURL", "/lost");
        assert_eq!(vsl.since(0).0, "", "off keeps nothing");
        vsl.set_capacity(2);
        vsl.log(1001, Side::Client, "ReqURL", "/a");
        vsl.log(1002, Side::Backend, "BereqURL", "/a\nb");
        vsl.log(1001, Side::Client, "End", "");
        let (text, last) = vsl.since(0);
        assert_eq!(text, "2 1002 b BereqURL /a\\nb\n3 1001 c End \n");
        assert_eq!(last, 3);
        assert_eq!(vsl.since(3), (String::new(), 3));
    }

    #[test]
    fn a_transaction_begins_and_ends_with_its_last_holder() {
        let vsl = Arc::new(Vsl::default());
        vsl.set_capacity(10);
        let t = Arc::new(Transaction::begin(
            vsl.clone(),
            1002,
            Side::Backend,
            ("bereq", 1001, "fetch"),
        ));
        let held = t.clone();
        drop(t);
        held.log("ESI_xmlerror", "ERR: after 3 x");
        drop(held);
        let (text, _) = vsl.since(0);
        assert_eq!(
            text,
            "1 1002 b Begin bereq 1001 fetch\n2 1002 b ESI_xmlerror ERR: after 3 x\n3 1002 b End \n"
        );
    }
}
