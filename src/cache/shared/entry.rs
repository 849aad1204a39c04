//! The fleet log's entries: a position in the log and the invalidation an entry carries
//! (written by `broadcast.rs`, applied by `feed.rs`), and the limits both keep.

use std::time::Duration;

use super::local::LocalTiers;
use crate::cache::CacheKey;

/// A node whose heartbeat is older is not waited for.
pub(super) const LIVE: Duration = Duration::from_secs(5);
/// The word a node that stopped cleanly (`Feed::leave`) writes after its position and time
/// in `P{fleet}nodes`: invalidations do not wait for it.
pub(super) const STOPPED: &str = "stopped";
/// Invalidations kept while Redis cannot be reached, sent when it can.
pub(super) const OUTBOX: usize = 10_000;

/// A position in the fleet's log (a stream id, `ms-seq`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub ms: u64,
    pub seq: u64,
}

impl Position {
    pub fn parse(s: &str) -> Option<Position> {
        let (ms, seq) = s.split_once('-')?;
        Some(Position {
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// One invalidation, as the log carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum Invalidation {
    Purge(CacheKey),
    Soft(CacheKey),
    Ban(String),
    Tags(Vec<String>),
}

impl Invalidation {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Invalidation::Purge(_) => "purge",
            Invalidation::Soft(_) => "soft",
            Invalidation::Ban(_) => "ban",
            Invalidation::Tags(_) => "tags",
        }
    }

    pub(super) fn arg(&self) -> String {
        match self {
            Invalidation::Purge(k) | Invalidation::Soft(k) => {
                format!("{}:{}", k.host_len(), k.text())
            }
            Invalidation::Ban(e) => e.clone(),
            Invalidation::Tags(t) => t.join(" "),
        }
    }

    pub(super) fn decode(kind: &[u8], arg: &[u8]) -> Option<Invalidation> {
        let arg = std::str::from_utf8(arg).ok()?;
        let url = || super::layout::tag_member_key(arg.as_bytes());
        Some(match kind {
            b"purge" => Invalidation::Purge(url()?),
            b"soft" => Invalidation::Soft(url()?),
            b"ban" => Invalidation::Ban(arg.to_string()),
            b"tags" => {
                Invalidation::Tags(arg.split_ascii_whitespace().map(str::to_string).collect())
            }
            _ => return None,
        })
    }

    /// Applies it to this node's local tiers; objects affected.
    pub fn apply_locally(&self, cache: &dyn LocalTiers) -> usize {
        match self {
            Invalidation::Purge(k) => cache.purge(k),
            Invalidation::Soft(k) => cache.soft_purge(k),
            Invalidation::Tags(t) => cache.purge_tags(t),
            Invalidation::Ban(e) => match cache.bans().add(e) {
                Ok(ban) => {
                    let storage = cache.storage().clone();
                    // Persisted like a local ban (disk tier); not waited for here.
                    tokio::spawn(async move {
                        if let Err(e) = storage.persist_ban(ban).await {
                            tracing::warn!(error = %e, "fleet ban not persisted");
                        }
                    });
                    1
                }
                Err(e) => {
                    tracing::warn!(error = %e, "fleet ban not applied");
                    0
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_order_and_parse() {
        let a = Position::parse("1700000000000-3").unwrap();
        let b = Position::parse("1700000000000-12").unwrap();
        assert!(a < b);
        assert!(b < Position::parse("1700000000001-0").unwrap());
        assert_eq!(a.to_string(), "1700000000000-3");
        for bad in ["", "1", "a-1", "1-", "-1"] {
            assert_eq!(Position::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn invalidations_round_trip() {
        for inv in [
            Invalidation::Purge(CacheKey::new("example.com:8080", "/a:b?c")),
            Invalidation::Soft(CacheKey::new("h", "/")),
            Invalidation::Ban("req.url ~ ^/news && obj.status == 200".into()),
            Invalidation::Tags(vec!["a".into(), "b".into()]),
        ] {
            let back = Invalidation::decode(inv.kind().as_bytes(), inv.arg().as_bytes());
            assert_eq!(back, Some(inv));
        }
        assert_eq!(Invalidation::decode(b"nuke", b"x"), None);
    }
}
