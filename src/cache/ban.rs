//! Bans: invalidation by expression (`req.url ~ ^/news/ && obj.http.content-type ~ html`),
//! applied lazily — an object is checked against the bans newer than itself when it is looked
//! up — and by a background sweeper that walks the memory tier and retires bans every object
//! has been checked against. Never a storage scan on the request path. The list is bounded.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use http::HeaderName;
use regex::Regex;

use super::{CacheKey, Object};

#[derive(Debug)]
enum Field {
    /// Path and query.
    Url,
    Host,
    Status,
    ObjHeader(HeaderName),
}

#[derive(Debug)]
enum Op {
    Match(Regex),
    NotMatch(Regex),
    Eq(String),
    Ne(String),
}

#[derive(Debug)]
struct Cond {
    field: Field,
    op: Op,
}

/// One ban: a conjunction of conditions, applying to objects stored before it.
#[derive(Debug)]
pub struct Ban {
    pub id: u64,
    pub created: Instant,
    pub expr: String,
    conds: Vec<Cond>,
}

impl Ban {
    /// Parses `FIELD OP VALUE [&& FIELD OP VALUE ...]`. Fields: `req.url`, `req.http.host`
    /// (or `req.host`), `obj.status`, `obj.http.NAME`. Operators: `~`, `!~` (regex), `==`,
    /// `!=`. Values may be quoted.
    pub fn parse(expr: &str) -> Result<Vec<(String, String, String)>, String> {
        let mut out = Vec::new();
        for part in expr.split("&&") {
            let part = part.trim();
            let (field, rest) = part
                .split_once(char::is_whitespace)
                .ok_or_else(|| format!("`{part}`: expected FIELD OP VALUE"))?;
            let rest = rest.trim_start();
            let (op, value) = ["!~", "~", "==", "!="]
                .iter()
                .find_map(|op| rest.strip_prefix(op).map(|v| (op.to_string(), v.trim())))
                .ok_or_else(|| format!("`{part}`: operator must be ~, !~, == or !="))?;
            let value = value.trim_matches('"').to_string();
            if value.is_empty() {
                return Err(format!("`{part}`: empty value"));
            }
            out.push((field.to_string(), op, value));
        }
        if out.is_empty() {
            return Err("empty ban expression".into());
        }
        Ok(out)
    }

    fn compile(id: u64, expr: &str) -> Result<Ban, String> {
        let mut conds = Vec::new();
        for (field, op, value) in Ban::parse(expr)? {
            let field = match field.as_str() {
                "req.url" => Field::Url,
                "req.http.host" | "req.host" => Field::Host,
                "obj.status" => Field::Status,
                f => match f.strip_prefix("obj.http.") {
                    Some(name) => Field::ObjHeader(
                        HeaderName::from_bytes(name.as_bytes())
                            .map_err(|_| format!("`{name}` is not a header name"))?,
                    ),
                    None => {
                        return Err(format!(
                            "unknown field `{f}` (use req.url, req.http.host, obj.status, obj.http.NAME)"
                        ));
                    }
                },
            };
            let regex = || Regex::new(&value).map_err(|e| format!("invalid regex `{value}`: {e}"));
            let op = match op.as_str() {
                "~" => Op::Match(regex()?),
                "!~" => Op::NotMatch(regex()?),
                "==" => Op::Eq(value),
                _ => Op::Ne(value),
            };
            conds.push(Cond { field, op });
        }
        Ok(Ban {
            id,
            created: Instant::now(),
            expr: expr.trim().to_string(),
            conds,
        })
    }

    /// Whether this ban removes `object` stored under `key`.
    pub fn matches(&self, key: &CacheKey, object: &Object) -> bool {
        self.conds.iter().all(|c| {
            let status;
            let value: Option<&str> = match &c.field {
                Field::Url => Some(&key.path_and_query),
                Field::Host => Some(&key.host),
                Field::Status => {
                    status = object.status.as_u16().to_string();
                    Some(&status)
                }
                Field::ObjHeader(name) => object.headers.get_str(name),
            };
            match (&c.op, value) {
                (Op::Match(re), Some(v)) => re.is_match(v),
                (Op::NotMatch(re), Some(v)) => !re.is_match(v),
                (Op::NotMatch(_), None) => true,
                (Op::Eq(want), Some(v)) => v == want,
                (Op::Ne(want), Some(v)) => v != want,
                (Op::Ne(_), None) => true,
                _ => false,
            }
        })
    }
}

/// Why a ban was not added.
#[derive(Debug, thiserror::Error)]
pub enum BanError {
    #[error("{0}")]
    Invalid(String),
    #[error("the ban list is full ({0} bans); wait for the sweeper to retire old ones")]
    Full(usize),
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

    /// Whether a ban newer than `object` matches it. One atomic load when there are no bans.
    pub fn is_banned(&self, key: &CacheKey, object: &Object) -> bool {
        if self.len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let bans = self.bans.read().unwrap_or_else(|p| p.into_inner());
        bans.iter()
            .rev()
            .take_while(|b| b.created > object.stored_at)
            .any(|b| b.matches(key, object))
    }

    /// Drops bans created before `t`: a complete sweep that started at `t` has checked every
    /// object they could apply to.
    pub fn retire_before(&self, t: Instant) -> usize {
        let mut bans = self.bans.write().unwrap_or_else(|p| p.into_inner());
        let before = bans.len();
        bans.retain(|b| b.created >= t);
        self.len.store(bans.len(), Ordering::Relaxed);
        before - bans.len()
    }

    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (id, seconds since creation, expression) of every active ban.
    pub fn list(&self) -> Vec<(u64, u64, String)> {
        let bans = self.bans.read().unwrap_or_else(|p| p.into_inner());
        bans.iter()
            .map(|b| (b.id, b.created.elapsed().as_secs(), b.expr.clone()))
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
        assert!(ban("req.url ~ ^/news/").matches(&key, &obj));
        assert!(!ban("req.url ~ ^/sport/").matches(&key, &obj));
        assert!(
            ban("req.http.host == www.example.com && obj.http.content-type ~ html")
                .matches(&key, &obj)
        );
        assert!(!ban("req.http.host == other.example && req.url ~ .").matches(&key, &obj));
        assert!(ban("obj.status == 200").matches(&key, &obj));
        assert!(ban("obj.http.x-missing !~ foo").matches(&key, &obj));
        assert!(ban(r#"req.url ~ "^/news/today""#).matches(&key, &obj));
        for bad in ["req.url", "req.url ^/x", "obj.foo ~ x", "req.url ~ (", ""] {
            assert!(Ban::compile(1, bad).is_err(), "{bad}");
        }
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
        assert_eq!(list.retire_before(Instant::now()), 2);
        assert!(list.is_empty());
    }
}
