//! What every thread of one running VTC file shares: macros, the log, the stop flag that winds
//! every entity down after the first failure (or a skip, or the file's time limit), the
//! sockets and processes to cut off then, and the barriers.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::Shutdown;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `feature` names this runner has (varnishtest's `feature`): a file that asks for another
/// is out of scope (`scope`) and skipped when run (`exec`). `ignore_unknown_macro` also turns
/// on [`Shared::ignore_unknown_macro`]; `feature cmd CMD` is decided by the command.
pub const FEATURES: &[&str] = &[
    "ipv4",
    "64bit",
    "SO_RCVTIMEO_WORKS",
    "!sanitizer",
    "!asan",
    "!coverage",
    "!workspace_emulator",
    "!tsan",
    "!msan",
    "!ubsan",
    "ignore_unknown_macro",
];

use super::barrier::{self, Barrier};
pub use super::halt::{Halt, Step, fail, lock, skip};

/// Which varnishtest the file was written for: it decides the defaults the harness adds
/// (trunk's `Host`/`Date`/`Server` fields, `vcl 4.1;`, ...) and a few spellings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Today's varnishtest (`varnishtest "..."`).
    Trunk,
    /// Varnish 2.1's (`test "..."`: no `vcl` line, `sema`, `-badvcl`, `resp.msg`).
    Legacy,
}

/// The most lines a file's log keeps: its first ones and its last ones (the start and the end
/// are what explain a failure).
const LOG_HEAD: usize = 1000;
const LOG_TAIL: usize = 3000;

/// The state one file's threads share.
pub struct Shared {
    pub flavour: Flavour,
    pub t0: Instant,
    /// The file's time limit: every wait ends by then.
    pub deadline: Instant,
    /// How long one HTTP read may wait (varnishtest: half the file's time limit).
    pub io_timeout: Duration,
    pub tmpdir: PathBuf,
    /// Leave `${name}` as it is when no macro has that name (`feature ignore_unknown_macro`).
    pub ignore_unknown_macro: AtomicBool,
    /// 2.1's files: HTTP/1.1 requests without `Host` get today's harness's default one
    /// (unless the file checks the `Host` its origin receives).
    pub legacy_host: AtomicBool,
    /// The file has a `logexpect`: its processes keep Varnish-style records (`log.vsl_records`).
    pub vsl: AtomicBool,
    /// The admin address of each running `varnish vN` (where `logexpect -v vN` reads).
    admins: Mutex<HashMap<String, std::net::SocketAddr>>,
    macros: Mutex<BTreeMap<String, String>>,
    stop: AtomicBool,
    first: Mutex<Option<Halt>>,
    log: Mutex<Log>,
    sockets: Mutex<HashMap<u64, super::stream::Stream>>,
    next_socket: AtomicU64,
    pids: Mutex<Vec<u32>>,
    barriers: Mutex<HashMap<String, Arc<Barrier>>>,
}

/// A file's log: the first lines, then a window of the last ones.
#[derive(Default)]
struct Log {
    head: Vec<String>,
    tail: std::collections::VecDeque<String>,
    dropped: u64,
}

impl Log {
    fn push(&mut self, line: String) {
        if self.head.len() < LOG_HEAD {
            self.head.push(line);
            return;
        }
        if self.tail.len() == LOG_TAIL {
            self.tail.pop_front();
            self.dropped += 1;
        }
        self.tail.push_back(line);
    }
}

impl Shared {
    pub fn new(flavour: Flavour, limit: Duration, tmpdir: PathBuf) -> Shared {
        let t0 = Instant::now();
        Shared {
            flavour,
            t0,
            deadline: t0 + limit,
            io_timeout: limit / 2,
            tmpdir,
            ignore_unknown_macro: AtomicBool::new(false),
            legacy_host: AtomicBool::new(false),
            vsl: AtomicBool::new(false),
            admins: Mutex::new(HashMap::new()),
            macros: Mutex::new(BTreeMap::new()),
            stop: AtomicBool::new(false),
            first: Mutex::new(None),
            log: Mutex::new(Log::default()),
            sockets: Mutex::new(HashMap::new()),
            next_socket: AtomicU64::new(0),
            pids: Mutex::new(Vec::new()),
            barriers: Mutex::new(HashMap::new()),
        }
    }

    /// Notes where `varnish vN`'s admin listener is (`None`: it stopped).
    pub fn set_admin(&self, name: &str, addr: Option<std::net::SocketAddr>) {
        let mut a = lock(&self.admins);
        match addr {
            Some(addr) => a.insert(name.to_string(), addr),
            None => a.remove(name),
        };
    }

    /// Where `varnish vN`'s admin listener is while it runs.
    pub fn admin(&self, name: &str) -> Option<std::net::SocketAddr> {
        lock(&self.admins).get(name).copied()
    }

    /// Appends a line to the file's log: elapsed seconds, who, what.
    pub fn log(&self, who: &str, msg: impl fmt::Display) {
        let t = self.t0.elapsed().as_secs_f64();
        let text = msg.to_string();
        let mut log = lock(&self.log);
        for (i, part) in text.split('\n').enumerate() {
            let line = if i == 0 {
                format!("{t:7.3} {who:<5} {part}")
            } else {
                format!("{:7} {:<5} | {part}", "", "")
            };
            log.push(line);
        }
    }

    /// The log so far.
    pub fn log_lines(&self) -> Vec<String> {
        let log = lock(&self.log);
        let mut out = log.head.clone();
        if log.dropped > 0 {
            out.push(format!("({} log lines left out)", log.dropped));
        }
        out.extend(log.tail.iter().cloned());
        out
    }

    /// Whether the run is winding down.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Records why the run halts (the first cause wins) and winds every entity down: sockets
    /// are shut, processes killed.
    pub fn halt(&self, who: &str, why: &Halt) {
        // After the first halt (or the end of the file) what fails is a consequence.
        if *why == Halt::Stopped || self.stopped() {
            return;
        }
        {
            let mut first = lock(&self.first);
            if first.is_none() {
                self.log(who, format!("---- {why}"));
                *first = Some(why.clone());
            }
        }
        self.stop_all();
    }

    /// The end of the file: what still runs is cancelled without a cause of its own.
    pub fn end(&self) {
        self.stop_all();
    }

    fn stop_all(&self) {
        self.stop.store(true, Ordering::Release);
        for (_, s) in lock(&self.sockets).drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
        for pid in lock(&self.pids).drain(..) {
            kill(pid);
        }
        for b in lock(&self.barriers).values() {
            b.wake_all();
        }
    }

    /// The first halt recorded, if any.
    pub fn outcome(&self) -> Option<Halt> {
        lock(&self.first).clone()
    }

    /// `Err(Stopped)` once the run winds down.
    pub fn check(&self) -> Step {
        if self.stopped() {
            Err(Halt::Stopped)
        } else {
            Ok(())
        }
    }

    /// Sleeps `d` (in slices, so a stop interrupts it).
    pub fn sleep(&self, d: Duration) -> Step {
        let end = Instant::now() + d;
        loop {
            self.check()?;
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            std::thread::sleep((end - now).min(Duration::from_millis(20)));
        }
    }

    /// Registers a socket to be shut down when the run stops; the key unregisters it.
    pub fn watch_socket(&self, s: &super::stream::Stream) -> Option<u64> {
        let clone = s.try_clone().ok()?;
        let key = self.next_socket.fetch_add(1, Ordering::Relaxed);
        lock(&self.sockets).insert(key, clone);
        if self.stopped() {
            let _ = s.shutdown(Shutdown::Both);
        }
        Some(key)
    }

    pub fn unwatch_socket(&self, key: Option<u64>) {
        if let Some(k) = key {
            lock(&self.sockets).remove(&k);
        }
    }

    /// Registers a child process to be killed when the run stops.
    pub fn watch_pid(&self, pid: u32) {
        lock(&self.pids).push(pid);
    }

    pub fn unwatch_pid(&self, pid: u32) {
        lock(&self.pids).retain(|p| *p != pid);
    }

    /// Defines (or redefines) macro `name`.
    pub fn define(&self, who: &str, name: &str, value: impl Into<String>) {
        let value = value.into();
        self.log(who, format!("macro def {name}={value}"));
        lock(&self.macros).insert(name.to_string(), value);
    }

    pub fn undefine(&self, who: &str, name: &str) {
        if lock(&self.macros).remove(name).is_some() {
            self.log(who, format!("macro undef {name}"));
        }
    }

    pub fn macro_value(&self, name: &str) -> Option<String> {
        lock(&self.macros).get(name).cloned()
    }

    /// `text` with every `${name}` replaced by the macro's value; `${date}` is the current
    /// HTTP date and `${string,repeat,N,TEXT}` TEXT N times, as varnishtest has them.
    pub fn expand(&self, text: &str) -> Step<String> {
        if !text.contains("${") {
            return Ok(text.to_string());
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[at..]);
                rest = "";
                break;
            };
            let name = &after[..end];
            match self.macro_for(name) {
                Some(v) => out.push_str(&v),
                None if self.ignore_unknown_macro.load(Ordering::Relaxed) => {
                    out.push_str(&rest[at..at + 3 + end]);
                }
                None => return fail(format!("Macro ${{{name}}} not found")),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn macro_for(&self, name: &str) -> Option<String> {
        if name == "date" {
            return Some(httpdate::fmt_http_date(std::time::SystemTime::now()));
        }
        if let Some(args) = name.strip_prefix("string,repeat,") {
            let (n, s) = args.split_once(',')?;
            return Some(s.repeat(n.trim().parse().ok()?));
        }
        self.macro_value(name)
    }

    /// The barrier named `name`, if declared.
    pub fn barrier(&self, name: &str) -> Option<Arc<Barrier>> {
        lock(&self.barriers).get(name).cloned()
    }

    /// Declares (or returns the declared) barrier `name`.
    pub fn barrier_or_insert(&self, name: &str, make: impl FnOnce() -> Barrier) -> Arc<Barrier> {
        lock(&self.barriers)
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(make()))
            .clone()
    }
}

/// Kills a process we started (SIGKILL by its id).
pub fn kill(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; the id is that of a
    // child this runner spawned and has not yet reaped.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

impl barrier::Run for Shared {
    fn log(&self, who: &str, msg: String) {
        Shared::log(self, who, msg);
    }

    fn stopped(&self) -> bool {
        Shared::stopped(self)
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared::new(Flavour::Trunk, Duration::from_secs(5), std::env::temp_dir())
    }

    #[test]
    fn macros_expand_and_fail_when_unknown() {
        let s = shared();
        s.define("top", "s1_port", "1234");
        assert_eq!(s.expand("a ${s1_port} b").unwrap(), "a 1234 b");
        assert_eq!(s.expand("${string,repeat,3,ab}").unwrap(), "ababab");
        assert!(s.expand("${date}").unwrap().ends_with("GMT"));
        assert_eq!(
            s.expand("${nope}"),
            Err(Halt::Fail("Macro ${nope} not found".into()))
        );
        s.ignore_unknown_macro.store(true, Ordering::Relaxed);
        assert_eq!(s.expand("x${nope}y").unwrap(), "x${nope}y");
        assert_eq!(s.expand("${unterminated").unwrap(), "${unterminated");
    }

    #[test]
    fn the_first_halt_wins() {
        let s = shared();
        s.halt("c1", &Halt::Stopped);
        assert!(!s.stopped());
        s.halt("c1", &Halt::Fail("one".into()));
        s.halt("s1", &Halt::Fail("two".into()));
        assert!(s.stopped());
        assert_eq!(s.outcome(), Some(Halt::Fail("one".into())));
        assert_eq!(s.sleep(Duration::from_secs(10)), Err(Halt::Stopped));
    }
}
