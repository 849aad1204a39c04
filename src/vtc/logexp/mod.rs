//! `logexpect lN -v vN [-g raw|vxid|request|session] [-d 0|1] [-q QUERY] [-i TAGS] [-err]
//! {SPEC} [-start|-wait|-run]`: varnishtest's check of the shared-memory log, against the
//! Varnish-style records Shellac keeps (`log.vsl_records`, read from `GET /vsl` — what the
//! process logged as it served, never the script). A thread polls the records every 10 ms,
//! groups them (`group.rs`), keeps the groups `-q` selects (`query.rs`) and the tags `-i`
//! names, and feeds them to the specification (`matcher.rs`) until it is done; `-wait`
//! fails the file when the specification failed, or was not done by the file's time limit.

mod group;
mod matcher;
mod query;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use group::Record;
use group::{Grouper, Grouping};
use matcher::{Matcher, Seen};
use query::Query;

use super::context::{Halt, Shared, Step, fail, skip};
use super::peer::Arg;
use crate::client::AdminClient;

/// The tags Shellac logs (`proxy/vcl/vsl.rs`, `txlog/vsl.rs`): a specification naming another
/// waits for a record that never comes, so the file is skipped instead, naming it.
const TAGS: &[&str] = &[
    "Begin",
    "End",
    "Link",
    "ReqMethod",
    "ReqURL",
    "ReqProtocol",
    "ReqHeader",
    "ReqUnset",
    "RespProtocol",
    "RespStatus",
    "RespReason",
    "RespHeader",
    "BereqMethod",
    "BereqURL",
    "BereqProtocol",
    "BereqHeader",
    "BereqUnset",
    "BerespProtocol",
    "BerespStatus",
    "BerespReason",
    "BerespHeader",
    "VCL_call",
    "VCL_return",
    "VCL_Log",
    "VCL_Error",
    "Fetch_Body",
    "ESI_xmlerror",
    "BackendClose",
    "FetchError",
];

/// One `logexpect lN`.
pub struct LogExpect {
    name: String,
    spec: Option<Spec>,
    thread: Option<JoinHandle<Step>>,
}

#[derive(Clone)]
struct Spec {
    varnish: String,
    grouping: Grouping,
    head: bool,
    query: Option<String>,
    include: Vec<String>,
    err: bool,
    block: String,
    line: u32,
}

impl LogExpect {
    pub fn new(name: &str) -> LogExpect {
        LogExpect {
            name: name.to_string(),
            spec: None,
            thread: None,
        }
    }

    /// One `logexpect lN ...` command (its words after the name).
    pub fn command(&mut self, shared: &Arc<Shared>, args: &[Arg]) -> Step {
        let mut i = 0;
        let mut spec = self.spec.clone();
        let mut declared = false;
        while i < args.len() {
            let (a, block, line) = (args[i].0.as_str(), args[i].1, args[i].2);
            let mut value = || -> Step<String> {
                i += 1;
                match args.get(i) {
                    Some(v) => Ok(v.0.clone()),
                    None => fail(format!("logexpect: {a} needs a value")),
                }
            };
            match a {
                "-start" => self.start(shared, spec.clone())?,
                "-wait" => self.wait(shared)?,
                "-run" => {
                    self.start(shared, spec.clone())?;
                    self.wait(shared)?;
                }
                "-v" => {
                    let v = value()?;
                    declared = true;
                    spec = Some(Spec {
                        varnish: v,
                        grouping: Grouping::Vxid,
                        head: false,
                        query: None,
                        include: Vec::new(),
                        err: false,
                        block: String::new(),
                        line,
                    });
                }
                _ if block => {
                    let s = declared_spec(&mut spec)?;
                    s.block = a.to_string();
                    s.line = line;
                }
                "-g" => {
                    let g = value()?;
                    declared_spec(&mut spec)?.grouping = Grouping::parse(&g)
                        .ok_or_else(|| Halt::Fail(format!("logexpect: unknown grouping {g}")))?;
                }
                "-d" => declared_spec(&mut spec)?.head = value()? == "1",
                "-q" => declared_spec(&mut spec)?.query = Some(value()?),
                "-i" => {
                    let tags = value()?;
                    declared_spec(&mut spec)?
                        .include
                        .extend(tags.split(',').map(|t| t.trim().to_string()));
                }
                "-err" => declared_spec(&mut spec)?.err = true,
                "-T" => {
                    value()?;
                }
                "-m" => {}
                other => {
                    return skip(format!(
                        "logexpect option {other} is not implemented by the runner"
                    ));
                }
            }
            i += 1;
        }
        if declared || spec.is_some() {
            self.spec = spec;
        }
        Ok(())
    }

    /// `-start`: where the records start (the newest now, unless `-d 1`), then the thread.
    fn start(&mut self, shared: &Arc<Shared>, spec: Option<Spec>) -> Step {
        self.wait(shared)?;
        let Some(spec) = spec else {
            return fail(format!("{}: -start without -v", self.name));
        };
        if let Some(why) = unsupported(&spec.block, spec.line) {
            return skip(why);
        }
        let mut matcher = Matcher::parse(&spec.block, spec.line)?;
        let query = spec.query.as_deref().map(Query::parse).transpose()?;
        let admin = shared.admin(&spec.varnish);
        let after = match (spec.head, admin) {
            (false, Some(a)) => newest(a)?,
            _ => 0,
        };
        shared.log(&self.name, "begin|");
        for l in matcher.start() {
            shared.log(&self.name, l);
        }
        let (s, name) = (shared.clone(), self.name.clone());
        let t = std::thread::Builder::new()
            .name(format!("vtc-{}", self.name))
            .spawn(move || {
                let r = run(
                    &s,
                    &name,
                    (&spec, query.as_ref()),
                    &mut matcher,
                    (admin, after),
                );
                if let Err(h) = &r {
                    s.halt(&name, h);
                }
                r
            })
            .map_err(|e| Halt::Fail(format!("cannot start a thread: {e}")))?;
        self.thread = Some(t);
        Ok(())
    }

    /// `-wait`: until the specification is done (or failed).
    pub fn wait(&mut self, shared: &Shared) -> Step {
        let Some(t) = self.thread.take() else {
            return Ok(());
        };
        shared.log(&self.name, "Waiting for logexp");
        match t.join() {
            Ok(r) => r,
            Err(_) => fail(format!("{}: its thread panicked", self.name)),
        }
    }
}

/// Why a specification is out of scope: a tag Shellac does not log (a record that never
/// comes), or a block the runner cannot read.
pub fn unsupported(block: &str, line: u32) -> Option<String> {
    let m = match Matcher::parse(block, line) {
        Ok(m) => m,
        Err(Halt::Skip(why)) => return Some(why),
        Err(_) => return None,
    };
    m.tags()
        .find(|t| !TAGS.contains(t))
        .map(|t| format!("logexpect on the VSL tag {t}, which Shellac does not log"))
}

/// Why a `-q` query is out of scope (record prefixes, field indexes), found before the file
/// runs: such a file would otherwise wait on its earlier logexpects until its time limit.
pub fn unsupported_query(q: &str) -> Option<String> {
    match Query::parse(q) {
        Err(Halt::Skip(why)) => Some(why),
        _ => None,
    }
}

fn declared_spec(spec: &mut Option<Spec>) -> Step<&mut Spec> {
    spec.as_mut()
        .ok_or_else(|| Halt::Fail("logexpect: -v must come first".into()))
}

/// The records after `after` of the process at `admin`.
fn fetch(admin: SocketAddr, after: u64) -> Step<Vec<Record>> {
    let client = AdminClient {
        addr: admin,
        token: None,
    };
    let r = client
        .request("GET", &format!("/vsl?after={after}"))
        .map_err(|e| Halt::Fail(format!("logexpect: GET /vsl: {e}")))?;
    if r.status != 200 {
        return fail(format!("logexpect: GET /vsl: {}", r.status));
    }
    Ok(r.body.lines().filter_map(Record::parse).collect())
}

/// The number of the newest record kept (0: none).
fn newest(admin: SocketAddr) -> Step<u64> {
    Ok(fetch(admin, 0)?.last().map_or(0, |r| r.seq))
}

fn run(
    shared: &Arc<Shared>,
    name: &str,
    (spec, query): (&Spec, Option<&Query>),
    matcher: &mut Matcher,
    (mut admin, mut after): (Option<SocketAddr>, u64),
) -> Step {
    let mut grouper = Grouper::new(spec.grouping);
    let mut log = Vec::new();
    loop {
        if matcher.done() {
            return Ok(());
        }
        shared.check()?;
        if std::time::Instant::now() > shared.deadline {
            return fail(format!("{name}: bad| outstanding expectations"));
        }
        // A process started (again) after -start: its records are all new.
        let now = shared.admin(&spec.varnish);
        if now != admin {
            admin = now;
            after = 0;
            grouper = Grouper::new(spec.grouping);
        }
        let records = match admin {
            Some(a) => fetch(a, after).unwrap_or_default(),
            None => Vec::new(),
        };
        let idle = records.is_empty();
        for r in records {
            after = r.seq;
            for group in grouper.push(r) {
                if query.is_some_and(|q| !q.matches(&group)) {
                    continue;
                }
                for r in group.iter().filter(|r| included(&spec.include, &r.tag)) {
                    let seen = matcher.feed(r, &mut log);
                    for l in log.drain(..) {
                        shared.log(name, l);
                    }
                    match seen {
                        Seen::Going => {}
                        Seen::Done => {
                            shared.log(name, "end|");
                            return if spec.err {
                                fail(format!("{name}: matched, but -err expected a failure"))
                            } else {
                                Ok(())
                            };
                        }
                        Seen::Failed(_) if spec.err => {
                            shared.log(name, "end| failed as expected");
                            return Ok(());
                        }
                        Seen::Failed(line) => {
                            let wanted = matcher.waiting_for().unwrap_or("a fail condition");
                            return fail(format!(
                                "{name}: bad| expectation failed: {wanted} (record: {line})"
                            ));
                        }
                    }
                }
            }
        }
        if idle {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Whether `-i` lets a record with this tag through (none given: all).
fn included(include: &[String], tag: &str) -> bool {
    include.is_empty()
        || include.iter().any(|i| match i.strip_suffix('*') {
            Some(prefix) => tag.starts_with(prefix),
            None => i.eq_ignore_ascii_case(tag),
        })
}
