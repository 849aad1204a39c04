//! Bans: invalidation by expression (`req.url ~ ^/news/ && obj.http.content-type ~ html`),
//! applied lazily — an object is checked against the bans newer than itself when it is looked
//! up — and by a background sweeper that walks the memory tier and retires bans every object
//! has been checked against. Never a storage scan on the request path. The list is bounded.
//!
//! A ban on the request's fields (`req.http.NAME`, as in Varnish) is evaluated against the
//! request looking the object up, so only a lookup can apply it: the sweeper and the disk
//! tier (which have no request) skip it, and it is retired only once nothing older than it is
//! left to be looked up.
//!
//! "Newer" is the monotonic clock for objects in memory and, for objects on disk, the position
//! in the disk tier's write stream (a ban applies to entries written before its position; see
//! `cache/disk`): clocks do not survive a restart and wall clocks can step backwards.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;
use std::time::{SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use regex::Regex;

use super::ban_expr::{Oper, Subject, Test};
use super::{CacheKey, Object};

/// One condition of a ban, its regex compiled.
#[derive(Debug)]
struct Cond {
    test: Test,
    regex: Option<Regex>,
}

/// Position of a ban not (yet) written to the disk tier: it covers every entry on disk.
pub const NOT_PERSISTED: u64 = u64::MAX;

/// One ban: a conjunction of conditions, applying to objects stored before it.
#[derive(Debug)]
pub struct Ban {
    pub id: u64,
    pub created: Instant,
    /// Wall clock when the ban was added, ms since the Unix epoch (kept across restarts).
    pub created_ms: u64,
    pub expr: String,
    conds: Vec<Cond>,
    /// Whether a condition tests the looking-up request (`req.http.NAME` but Host): only a
    /// lookup can apply the ban.
    pub needs_request: bool,
    /// Position in the disk tier's write stream; disk entries before it are covered.
    pos: AtomicU64,
}

/// What the bans newer than an object say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BanCheck {
    Clear,
    Banned,
    /// A ban on the request's fields may match: only a lookup with the request can tell.
    NeedsRequest,
}

impl Ban {
    /// Parses `FIELD OP ARG [&& FIELD OP ARG ...]` as Varnish does (`cache/ban_expr.rs`:
    /// its fields, operators and words for a refusal).
    fn compile(id: u64, expr: &str) -> Result<Ban, String> {
        let mut conds = Vec::new();
        for test in super::ban_expr::parse(expr)? {
            let regex = match test.oper {
                Oper::Match | Oper::NotMatch => {
                    Some(Regex::new(&test.arg).map_err(|e| format!("Regex compile error: {e}"))?)
                }
                _ => None,
            };
            conds.push(Cond { test, regex });
        }
        Ok(Ban {
            needs_request: conds.iter().any(
                |c| matches!(&c.test.subject, Subject::ReqHeader(n) if n != http::header::HOST),
            ),
            id,
            created: Instant::now(),
            created_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            expr: expr.trim().to_string(),
            conds,
            pos: AtomicU64::new(NOT_PERSISTED),
        })
    }

    /// Position in the disk tier's write stream ([`NOT_PERSISTED`] until written).
    pub fn pos(&self) -> u64 {
        self.pos.load(Ordering::Acquire)
    }

    /// Sets the position (the disk writer, when it persists the ban).
    pub fn set_pos(&self, pos: u64) {
        self.pos.store(pos, Ordering::Release);
    }

    /// Whether this ban removes `object` stored under `key`; `req`: the request looking it up
    /// (without one, a ban on the request's fields matches nothing).
    pub fn matches(&self, key: &CacheKey, object: &Object, req: Option<&HeaderMap>) -> bool {
        if self.needs_request && req.is_none() {
            return false;
        }
        self.conds.iter().all(|c| {
            let status;
            let text: Option<&str> = match &c.test.subject {
                Subject::Url => Some(key.path_and_query()),
                // The Host the object was stored under: no request needed.
                Subject::ReqHeader(n) if n == http::header::HOST => Some(key.host()),
                Subject::ReqHeader(n) => req.and_then(|r| r.get(n)).and_then(|v| v.to_str().ok()),
                Subject::ObjHeader(n) => object.headers.get_str(n),
                Subject::Status => {
                    status = object.status.as_u16().to_string();
                    Some(&status)
                }
                Subject::Ttl | Subject::Age | Subject::Grace | Subject::Keep => None,
            };
            let number = match c.test.subject {
                Subject::Ttl | Subject::Age | Subject::Grace | Subject::Keep => {
                    seconds(&c.test.subject, object)
                }
                _ => 0.0,
            };
            c.test.holds(text, number, c.regex.as_ref())
        })
    }
}

/// `obj.ttl` (freshness left), `obj.age`, `obj.grace`, `obj.keep` of `object`, in seconds.
fn seconds(subject: &Subject, object: &Object) -> f64 {
    let age = object.initial_age.get() + object.stored_at.elapsed();
    match subject {
        Subject::Age => age.as_secs_f64(),
        Subject::Ttl => object.ttl.get().as_secs_f64() - age.as_secs_f64(),
        Subject::Grace => object.grace.get().as_secs_f64(),
        _ => object.keep.get().as_secs_f64(),
    }
}

/// Why a ban was not added.
#[derive(Debug, thiserror::Error)]
pub enum BanError {
    #[error("{0}")]
    Invalid(String),
    #[error("the ban list is full ({0} bans); wait for the sweeper to retire old ones")]
    Full(usize),
    /// Applied now, but not written to the disk tier: it will not survive a restart.
    #[error(
        "ban applied, but it could not be written to the disk cache ({0}); it will not survive a restart"
    )]
    NotDurable(String),
    /// Not applied: the persisted list has no room (its size on disk is bounded).
    #[error(
        "ban not applied: the ban list kept by the disk cache is full ({0} bytes); wait for old bans to be retired"
    )]
    PersistFull(u64),
}

/// The active bans, oldest first.
pub struct BanList {
    bans: RwLock<Vec<Arc<Ban>>>,
    len: AtomicUsize,
    next_id: AtomicU64,
    max: usize,
}

impl BanList {
    pub fn new(max: usize) -> BanList {
        BanList {
            bans: RwLock::new(Vec::new()),
            len: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            max,
        }
    }

    /// Adds a ban for everything stored until now that matches `expr`.
    pub fn add(&self, expr: &str) -> Result<Arc<Ban>, BanError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let ban = Arc::new(Ban::compile(id, expr).map_err(BanError::Invalid)?);
        let mut bans = self.bans.write().unwrap_or_else(|p| p.into_inner());
        if bans.len() >= self.max {
            return Err(BanError::Full(self.max));
        }
        bans.push(ban.clone());
        self.len.store(bans.len(), Ordering::Relaxed);
        Ok(ban)
    }

    /// Re-adds a ban read back from the disk tier: older than every object stored in this
    /// process, covering disk entries before `pos`. Bypasses the bound (the caller keeps to it).
    pub fn restore(&self, expr: &str, created_ms: u64, pos: u64) -> Result<Arc<Ban>, BanError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut ban = Ban::compile(id, expr).map_err(BanError::Invalid)?;
        ban.created_ms = created_ms;
        ban.pos = AtomicU64::new(pos);
        let ban = Arc::new(ban);
        let mut bans = self.bans.write().unwrap_or_else(|p| p.into_inner());
        bans.push(ban.clone());
        self.len.store(bans.len(), Ordering::Relaxed);
        Ok(ban)
    }

    /// The bound on active bans.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Every active ban, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<Ban>> {
        self.bans.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Removes one ban (one the disk tier could not persist). True if it was there.
    pub fn remove(&self, id: u64) -> bool {
        self.retire_where(|b| b.id == id) == 1
    }

    /// Drops every ban for which `f` is true; returns how many.
    pub fn retire_where(&self, f: impl Fn(&Ban) -> bool) -> usize {
        let mut bans = self.bans.write().unwrap_or_else(|p| p.into_inner());
        let before = bans.len();
        bans.retain(|b| !f(b));
        self.len.store(bans.len(), Ordering::Relaxed);
        before - bans.len()
    }

    /// Whether a ban positioned after the disk entry at stream position `pos` matches the
    /// object read from it. One atomic load when there are no bans.
    pub fn is_banned_on_disk(&self, pos: u64, key: &CacheKey, object: &Object) -> bool {
        if self.len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let bans = self.bans.read().unwrap_or_else(|p| p.into_inner());
        bans.iter()
            .any(|b| b.pos() > pos && b.matches(key, object, None))
    }

    /// Whether a ban newer than `object` matches it, without a request (bans on the request's
    /// fields match nothing). One atomic load when there are no bans.
    pub fn is_banned(&self, key: &CacheKey, object: &Object) -> bool {
        self.check(key, object, None) == BanCheck::Banned
    }

    /// What the bans newer than `object` say of it, looked up by `req` (`None`: a lookup
    /// that has no request map at hand, which a ban on the request's fields sends to one
    /// that has). One atomic load when there are no bans.
    pub fn check(&self, key: &CacheKey, object: &Object, req: Option<&HeaderMap>) -> BanCheck {
        if self.len.load(Ordering::Relaxed) == 0 {
            return BanCheck::Clear;
        }
        let bans = self.bans.read().unwrap_or_else(|p| p.into_inner());
        let mut verdict = BanCheck::Clear;
        for b in bans
            .iter()
            .rev()
            .take_while(|b| b.created > object.stored_at)
        {
            if b.needs_request && req.is_none() {
                verdict = BanCheck::NeedsRequest;
            } else if b.matches(key, object, req) {
                return BanCheck::Banned;
            }
        }
        verdict
    }

    /// Drops bans created before `t`: a complete sweep that started at `t` has checked every
    /// object they could apply to — but those on the request's fields, which it cannot check:
    /// they go once older than `oldest`, the oldest object the sweep saw (nothing left for
    /// them to match).
    pub fn retire_before(&self, t: Instant, oldest: Instant) -> usize {
        self.retire_where(|b| b.created < t && (!b.needs_request || b.created < oldest))
    }

    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (id, seconds since creation, expression) of every active ban. The age is by the wall
    /// clock, so bans read back after a restart show their real age.
    pub fn list(&self) -> Vec<(u64, u64, String)> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let bans = self.bans.read().unwrap_or_else(|p| p.into_inner());
        bans.iter()
            .map(|b| {
                let age = now_ms.saturating_sub(b.created_ms) / 1000;
                (b.id, age, b.expr.clone())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::test_object;

    #[test]
    fn parse_and_match() {
        let obj = test_object(&[("content-type", "text/html")]);
        let key = CacheKey::new("www.example.com", "/news/today?x=1");
        let ban = |e: &str| Ban::compile(1, e).unwrap();
        assert!(ban("req.url ~ ^/news/").matches(&key, &obj, None));
        assert!(!ban("req.url ~ ^/sport/").matches(&key, &obj, None));
        assert!(
            ban("req.http.host == www.example.com && obj.http.content-type ~ html")
                .matches(&key, &obj, None)
        );
        assert!(!ban("req.http.host == other.example && req.url ~ .").matches(&key, &obj, None));
        assert!(ban("obj.status == 200").matches(&key, &obj, None));
        assert!(ban("obj.http.x-missing !~ foo").matches(&key, &obj, None));
        assert!(ban(r#"req.url ~ "^/news/today""#).matches(&key, &obj, None));
        for bad in ["req.url", "req.url ^/x", "obj.foo ~ x", "req.url ~ (", ""] {
            assert!(Ban::compile(1, bad).is_err(), "{bad}");
        }
    }

    /// Issue 21 (varnishtest c00133): `req.http.NAME` tests the looking-up request; without
    /// one such a ban matches nothing, and is retired only once older than every object.
    #[test]
    fn bans_on_request_fields_need_the_request() {
        let obj = test_object(&[]);
        let key = CacheKey::new("h", "/");
        let list = BanList::new(4);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let ban = list.add("req.http.version == a && req.url ~ ^/").unwrap();
        assert!(ban.needs_request);
        let mut req = HeaderMap::new();
        req.insert("version", "a".parse().unwrap());
        assert_eq!(list.check(&key, &obj, Some(&req)), BanCheck::Banned);
        req.insert("version", "b".parse().unwrap());
        assert_eq!(list.check(&key, &obj, Some(&req)), BanCheck::Clear);
        assert_eq!(list.check(&key, &obj, None), BanCheck::NeedsRequest);
        assert!(!list.is_banned(&key, &obj));
        assert!(!list.is_banned_on_disk(0, &key, &obj));
        // A sweep that saw `obj` (older than the ban) keeps it; one that saw nothing older
        // retires it.
        let now = Instant::now();
        assert_eq!(list.retire_before(now, obj.stored_at), 0);
        assert_eq!(list.retire_before(now, now), 1);
        assert!(Ban::compile(1, "req.http.bad name == x").is_err());
    }

    #[test]
    fn only_older_objects_and_bounded() {
        let list = BanList::new(2);
        let old = test_object(&[]);
        std::thread::sleep(std::time::Duration::from_millis(2));
        list.add("req.url ~ .").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let new = test_object(&[]);
        let key = CacheKey::new("h", "/");
        assert!(list.is_banned(&key, &old));
        assert!(
            !list.is_banned(&key, &new),
            "objects stored after the ban are not affected"
        );
        list.add("req.url ~ a").unwrap();
        assert!(matches!(list.add("req.url ~ b"), Err(BanError::Full(2))));
        assert_eq!(list.retire_before(Instant::now(), Instant::now()), 2);
        assert!(list.is_empty());
    }

    #[test]
    fn disk_objects_are_ordered_by_stream_position() {
        let list = BanList::new(4);
        let obj = test_object(&[]);
        let key = CacheKey::new("h", "/news/1");
        let ban = list.add("req.url ~ ^/news/").unwrap();
        assert!(
            list.is_banned_on_disk(1 << 40, &key, &obj),
            "not yet persisted: covers every disk entry"
        );
        ban.set_pos(1000);
        assert!(list.is_banned_on_disk(999, &key, &obj));
        assert!(!list.is_banned_on_disk(1000, &key, &obj));
        assert!(!list.is_banned_on_disk(5, &CacheKey::new("h", "/sport"), &obj));
        let restored = list.restore("req.url ~ ^/sport", 7, 50).unwrap();
        assert_eq!(restored.created_ms, 7);
        assert!(list.is_banned_on_disk(49, &CacheKey::new("h", "/sport"), &obj));
        assert!(
            !list.is_banned(&CacheKey::new("h", "/sport"), &test_object(&[])),
            "older than objects stored in this process"
        );
        assert!(list.remove(ban.id));
        assert!(!list.remove(ban.id));
        assert_eq!(list.snapshot().len(), 1);
    }
}
