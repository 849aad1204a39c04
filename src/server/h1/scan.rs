//! Scanning and refusal: every byte hyper reads passes the strict scanner first; a refused
//! request becomes a stand-in that hyper answers, a bad body fails.

use std::sync::atomic::Ordering;

use crate::http::strict::{Class, Framing, Scan, Violation, valid_request_line};
use crate::stats::Counters;

use super::conn::UPGRADE_PENDING;
use super::{After, Gate, Mode, Outcome};

/// What hyper parses in place of a refused request. The service recognises it by its number,
/// never by its content.
const STAND_IN: &[u8] = b"GET / HTTP/1.1\r\nhost: refused.invalid\r\n\r\n";

/// The stand-in for a refused `HEAD` request: hyper then sends the refusal's head without its
/// body (RFC 9110 §9.3.2), as for any other answer to HEAD.
const STAND_IN_HEAD: &[u8] = b"HEAD / HTTP/1.1\r\nhost: refused.invalid\r\n\r\n";

impl<T> Gate<T> {
    /// Runs the scanner over `data`, which continues the stream where the last run stopped.
    /// With `answer` (`may_answer`), bodiless heads at the start of `data` are offered to the
    /// answerer one after the other until it declines one; the first number returned is how
    /// many bytes of `data` were answered that way (they must not reach hyper).
    pub(super) fn scan(&mut self, data: &mut [u8], mut answer: bool) -> (usize, Outcome) {
        let mut answered = 0;
        let outcome = self.scan_from(data, &mut answer, &mut answered);
        (answered, outcome)
    }

    fn scan_from(&mut self, data: &mut [u8], answer: &mut bool, answered: &mut usize) -> Outcome {
        let mut pos = 0;
        // Start of the last head found in `data` (its request not yet handed to hyper).
        let mut head_at: Option<usize> = None;
        while pos < data.len() {
            let scan = self.scanner.scan(&data[pos..]);
            // A later HTTP/1 minor version is read as HTTP/1.1, by the scanner and, rewritten
            // here before anything else sees the head, by the answerer and hyper alike.
            if let Scan::Head(n, head) = &scan
                && head.later_minor
            {
                crate::http::strict::as_http11(&mut data[pos..pos + n]);
            }
            match scan {
                // CONNECT is refused here, as a whole request: hyper hands the socket of a
                // CONNECT to its upgrade machinery instead of closing it, which would reset
                // the connection under the error response.
                Scan::Head(_, _) if data[pos..].starts_with(b"CONNECT ") => {
                    let violation = Violation::ConnectNotSupported;
                    self.count(violation);
                    return Outcome::RefuseRequest {
                        cut: pos,
                        violation,
                    };
                }
                Scan::Head(n, head)
                    if *answer
                        && pos == *answered
                        && head.framing == Framing::None
                        && !head.upgrade
                        && self.try_answer(&data[pos..pos + n]) =>
                {
                    pos += n;
                    *answered = pos;
                }
                Scan::Head(n, head) => {
                    *answer = false;
                    head_at = Some(pos);
                    self.heads += 1;
                    self.state.body_started();
                    pos += n;
                    if head.upgrade {
                        // What follows may not be HTTP: read on only once the service decided.
                        self.state.upgrade.store(UPGRADE_PENDING, Ordering::Relaxed);
                        self.state
                            .upgrade_at
                            .store(self.heads - 1, Ordering::Relaxed);
                        self.mode = Mode::AwaitUpgrade;
                        return Outcome::Valid { held_from: pos };
                    }
                }
                Scan::Body(n) => pos += n,
                Scan::Incomplete => return Outcome::Valid { held_from: pos },
                Scan::Reject(violation) => {
                    self.count(violation);
                    return if self.scanner.at_head() {
                        Outcome::RefuseRequest {
                            cut: pos,
                            violation,
                        }
                    } else if let Some(cut) = head_at {
                        // The bad body bytes came with their head: refuse the whole request.
                        self.heads -= 1;
                        Outcome::RefuseRequest { cut, violation }
                    } else {
                        Outcome::FailBody {
                            cut: pos,
                            violation,
                        }
                    };
                }
            }
        }
        Outcome::Valid {
            held_from: data.len(),
        }
    }

    fn count(&self, v: Violation) {
        count_violation(&self.counters, v);
    }

    /// Queues the stand-in request for `v`; nothing is read after it. `from` is the refused
    /// request's first bytes (its line is kept for the access log when it is valid).
    pub(super) fn refuse(&mut self, v: Violation, from: &[u8]) {
        if let Some(line) = valid_request_line(from, self.max_request_line) {
            let _ = self.state.refused_line.set(line.into());
        }
        self.state.reject.store(v as u8, Ordering::Relaxed);
        self.state.reject_at.store(self.heads, Ordering::Relaxed);
        self.heads += 1;
        // The method is case-sensitive (RFC 9110 §9.1): only `HEAD` itself is a HEAD request.
        let stand_in = if from.starts_with(b"HEAD ") {
            STAND_IN_HEAD
        } else {
            STAND_IN
        };
        self.pending.extend_from_slice(stand_in);
        self.held = Vec::new();
        self.after = After::Stop;
    }

    pub(super) fn fail_body(&mut self, v: Violation) {
        self.state.body_error.store(v as u8, Ordering::Relaxed);
        self.held = Vec::new();
        self.after = After::BodyError(v);
    }

    /// Scans held bytes (a partial head and what followed it): the valid part is queued for
    /// hyper, an incomplete head stays held.
    pub(super) fn scan_held(&mut self, mut held: Vec<u8>) {
        let answer = self.may_answer();
        let (answered, outcome) = self.scan(&mut held, answer);
        // The answered requests come first; hyper's bytes run from them to `to`.
        let hypers = |to: usize| &held[answered.min(to)..to];
        match outcome {
            Outcome::Valid { held_from } => {
                self.pending.extend_from_slice(hypers(held_from));
                self.held = held;
                self.held.drain(..held_from);
            }
            Outcome::RefuseRequest { cut, violation } => {
                self.pending.extend_from_slice(hypers(cut));
                self.refuse(violation, &held[cut..]);
            }
            Outcome::FailBody { cut, violation } => {
                self.pending.extend_from_slice(hypers(cut));
                self.fail_body(violation);
            }
        }
    }
}

/// Counts a refused request in its class's `client_reject_*` counter (and `client_req_400`).
pub(in crate::server) fn count_violation(c: &Counters, v: Violation) {
    match v.class() {
        Class::RequestLine => c.client_reject_request_line.inc(),
        Class::Header => c.client_reject_header.inc(),
        Class::Host => c.client_reject_host.inc(),
        Class::Framing => c.client_reject_framing.inc(),
        Class::HopByHop => c.client_reject_hop_by_hop.inc(),
        Class::Chunked => c.client_reject_chunked.inc(),
        Class::Limit => c.client_reject_limit.inc(),
    }
    if v.status() == 400 {
        c.client_req_400.inc();
    }
    tracing::debug!(violation = v.as_str(), "client request refused");
}
