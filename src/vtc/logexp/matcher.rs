//! A `logexpect` specification and its matching, as vtc_logexp.c matches: `expect SKIP VXID
//! TAG [REGEX]` in order (SKIP: how many records may pass unmatched before this one, `*` any,
//! `?` one of a block of alternatives in any order), `fail add VXID TAG [REGEX]` (a record
//! matching it fails at once) and `fail clear`. VXID and TAG take `*` (any) and `=` (the
//! last matched record's).

use regex::Regex;

use super::Record;
use crate::vtc::context::{Halt, Step, fail};
use crate::vtc::lex;

/// A number, any, or the last matched record's.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Want<T> {
    Any,
    Last,
    Is(T),
}

/// How many records may be skipped before a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Skip {
    Max(u64),
    Any,
    /// One of a block of alternatives (`?`); `Seen` once matched.
    Alt,
    Seen,
    /// `fail add`.
    Fail,
    /// `fail clear`.
    Clear,
}

#[derive(Clone, Debug)]
struct Test {
    text: String,
    skip: Skip,
    vxid: Want<u64>,
    tag: Want<String>,
    re: Option<Regex>,
}

/// The specification being matched.
#[derive(Debug)]
pub struct Matcher {
    tests: Vec<Test>,
    /// The test being matched (`None`: all matched, or not started).
    at: Option<usize>,
    started: bool,
    skipped: u64,
    vxid_last: Option<u64>,
    tag_last: Option<String>,
    fails: Vec<usize>,
}

/// What a record did to the specification.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    Going,
    Done,
    /// The specification failed on this record (its line for the log).
    Failed(String),
}

impl Matcher {
    /// Parses the block of a `logexpect` (its lines split as VTC commands).
    pub fn parse(block: &str, line: u32) -> Step<Matcher> {
        let cmds = lex::split(block, line).map_err(|e| Halt::Fail(format!("VTC syntax: {e}")))?;
        let mut tests = Vec::new();
        for c in &cmds {
            let w: Vec<&str> = c.words.iter().map(|w| w.text.as_str()).collect();
            let (skip, rest) = match w.as_slice() {
                ["expect", skip, rest @ ..] => (parse_skip(skip)?, rest),
                ["fail", "add", rest @ ..] => (Skip::Fail, rest),
                ["fail", "clear"] => {
                    tests.push(Test {
                        text: "fail clear".into(),
                        skip: Skip::Clear,
                        vxid: Want::Any,
                        tag: Want::Any,
                        re: None,
                    });
                    continue;
                }
                _ => return fail(format!("logexpect: unknown command {:?}", w.join(" "))),
            };
            let (vxid, tag, re) = match rest {
                [vxid, tag] => (vxid, tag, None),
                [vxid, tag, re] => (vxid, tag, Some(*re)),
                _ => return fail(format!("logexpect: bad arguments {:?}", w.join(" "))),
            };
            tests.push(Test {
                text: w.join(" "),
                skip,
                vxid: match *vxid {
                    "*" => Want::Any,
                    "=" => Want::Last,
                    n => Want::Is(n.parse().map_err(|_| {
                        Halt::Fail(format!("logexpect: not a positive integer: '{n}'"))
                    })?),
                },
                tag: match *tag {
                    "*" => Want::Any,
                    "=" => Want::Last,
                    t => Want::Is(t.to_string()),
                },
                re: re.map(crate::vtc::expect::regex).transpose()?,
            });
        }
        Ok(Matcher {
            tests,
            at: None,
            started: false,
            skipped: 0,
            vxid_last: None,
            tag_last: None,
            fails: Vec::new(),
        })
    }

    /// The tag names the specification names (to check them against the records Shellac
    /// keeps).
    pub fn tags(&self) -> impl Iterator<Item = &str> {
        self.tests.iter().filter_map(|t| match &t.tag {
            Want::Is(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// Begins (or begins again): the first test, no fail list.
    pub fn start(&mut self) -> Vec<String> {
        for t in &mut self.tests {
            if t.skip == Skip::Seen {
                t.skip = Skip::Alt;
            }
        }
        self.fails.clear();
        self.at = None;
        self.started = false;
        self.skipped = 0;
        self.vxid_last = None;
        self.tag_last = None;
        let mut log = Vec::new();
        self.next(&mut log);
        log
    }

    /// Whether every test matched and no fail condition is left.
    pub fn done(&self) -> bool {
        self.started && self.at.is_none() && self.fails.is_empty()
    }

    /// The test being waited for, for a failure's message.
    pub fn waiting_for(&self) -> Option<&str> {
        self.at.map(|i| self.tests[i].text.as_str())
    }

    fn next(&mut self, log: &mut Vec<String>) {
        let mut i = match self.at {
            Some(i) if self.tests[i].skip == Skip::Alt => return,
            Some(i) => i + 1,
            None if !self.started => {
                self.started = true;
                0
            }
            None => return,
        };
        loop {
            let Some(t) = self.tests.get(i) else {
                self.at = None;
                return;
            };
            match t.skip {
                Skip::Seen => i += 1,
                Skip::Clear => {
                    log.push("condition| fail clear".into());
                    self.fails.clear();
                    i += 1;
                }
                Skip::Fail => {
                    log.push(format!("condition| {}", t.text));
                    self.fails.push(i);
                    i += 1;
                }
                _ => {
                    log.push(format!("expecting| {}", t.text));
                    self.at = Some(i);
                    return;
                }
            }
        }
    }

    /// Whether test `i` matches `r` (vtc_logexp.c's logexp_match without the alternatives).
    fn matches(&self, i: usize, r: &Record) -> bool {
        let t = &self.tests[i];
        let vxid_ok = match t.vxid {
            Want::Any => true,
            Want::Last => self.vxid_last == Some(r.vxid),
            Want::Is(n) => n == r.vxid,
        };
        let tag_ok = match &t.tag {
            Want::Any => true,
            Want::Last => self.tag_last.as_deref() == Some(r.tag.as_str()),
            Want::Is(tag) => *tag == r.tag,
        };
        // As varnishtest: the regex is tried only on a test naming the record's tag.
        let re_ok = match (&t.re, &t.tag) {
            (Some(re), Want::Is(tag)) if *tag == r.tag => re.is_match(&r.data),
            _ => true,
        };
        vxid_ok && tag_ok && re_ok
    }

    /// Takes one record; `log` gets the lines varnishtest would print.
    pub fn feed(&mut self, r: &Record, log: &mut Vec<String>) -> Seen {
        let line = format!("{:10} {:<15} {} {}", r.vxid, r.tag, r.side, r.data);
        if self.fails.iter().any(|&f| self.matches(f, r)) {
            log.push(format!("fail | {line}"));
            return Seen::Failed(line);
        }
        let Some(mut i) = self.at else {
            return if self.done() { Seen::Done } else { Seen::Going };
        };
        loop {
            let t = &self.tests[i];
            if self.matches(i, r) {
                log.push(format!("match| {line}"));
                if t.skip == Skip::Alt {
                    self.tests[i].skip = Skip::Seen;
                }
                self.vxid_last = Some(r.vxid);
                self.tag_last = Some(r.tag.clone());
                self.skipped = 0;
                self.next(log);
                return if self.done() { Seen::Done } else { Seen::Going };
            }
            match t.skip {
                Skip::Alt => match self.alternative(i) {
                    Some(j) => {
                        log.push(format!("alt      | {}", self.tests[j].text));
                        i = j;
                    }
                    None => {
                        log.push(format!("err  | {line}"));
                        return Seen::Failed(line);
                    }
                },
                Skip::Any => {
                    self.skipped += 1;
                    return Seen::Going;
                }
                Skip::Max(n) if n > self.skipped => {
                    self.skipped += 1;
                    return Seen::Going;
                }
                _ => {
                    log.push(format!("err  | {line}"));
                    return Seen::Failed(line);
                }
            }
        }
    }

    /// The alternative after `i` in its block not seen yet.
    fn alternative(&self, i: usize) -> Option<usize> {
        let mut j = i + 1;
        while let Some(t) = self.tests.get(j) {
            match t.skip {
                Skip::Seen => j += 1,
                Skip::Alt => return Some(j),
                _ => return None,
            }
        }
        None
    }
}

fn parse_skip(s: &str) -> Step<Skip> {
    Ok(match s {
        "*" => Skip::Any,
        "?" => Skip::Alt,
        n => Skip::Max(
            n.parse()
                .map_err(|_| Halt::Fail(format!("logexpect: bad skip '{n}'")))?,
        ),
    })
}
