//! Purges in the shared tier (a URL's variants, soft, by tag), and what the admin API reads
//! of it (an object's record, a URL's variants).

use std::time::Duration;

use bytes::Bytes;
use http::HeaderName;

use super::entry::Position;
use super::layout::{self, UrlKeys};
use super::lookup::parse_names;
use super::remote::Reply;
use super::scripts;
use super::tier::SharedTier;
use crate::cache::{CacheKey, Object};

impl SharedTier {
    /// Removes every variant of `primary` from the shared tier and marks the URL purged at
    /// `at` (fills that started before are refused). None if Redis could not be asked.
    pub async fn purge_url(&self, primary: &CacheKey, at: Position) -> Option<u64> {
        let keys = UrlKeys::new(&self.prefix, primary);
        let mark_ms = (self.lease_timeout.max(Duration::from_secs(600))).as_millis();
        let purge = self.remote.eval(
            &scripts::PURGE,
            vec![keys.index()],
            vec![
                keys.base(),
                at.to_string().into_bytes(),
                mark_ms.to_string().into_bytes(),
            ],
        );
        let n = self.call(self.write_timeout, purge).await?.int()?;
        Some(n.max(0) as u64)
    }

    /// Soft-purges every variant of `primary` in the shared tier: its copies stay, stale from
    /// now (grace and keep still apply, on every node that reads them). None if Redis could
    /// not be asked.
    pub async fn soft_purge_url(&self, primary: &CacheKey) -> Option<u64> {
        let keys = UrlKeys::new(&self.prefix, primary);
        let soft = self.remote.eval(
            &scripts::SOFT_PURGE,
            vec![keys.index()],
            vec![keys.base(), layout::wall_ms().to_string().into_bytes()],
        );
        let n = self.call(self.write_timeout, soft).await?.int()?;
        Some(n.max(0) as u64)
    }

    /// The URLs tagged `tag` in the shared tier: (set member, URL).
    pub async fn tag_members(&self, tag: &str) -> Option<Vec<(Bytes, CacheKey)>> {
        let get = self.remote.command(vec![
            b"SMEMBERS".to_vec(),
            layout::tag_key(&self.prefix, tag),
        ]);
        let members = self.call(self.write_timeout, get).await?;
        Some(
            members
                .array()
                .into_iter()
                .filter_map(Reply::data)
                .filter_map(|m| layout::tag_member_key(&m).map(|url| (m, url)))
                .collect(),
        )
    }

    /// Takes `members` (their copies purged) out of `tag`'s set; members added since stay.
    pub async fn drop_tag_members(&self, tag: &str, members: Vec<Bytes>) -> Option<()> {
        if members.is_empty() {
            return Some(());
        }
        let mut args = vec![b"SREM".to_vec(), layout::tag_key(&self.prefix, tag)];
        args.extend(members.into_iter().map(|m| m.to_vec()));
        self.call(self.write_timeout, self.remote.command(args))
            .await
            .map(drop)
    }

    /// Whether the shared tier holds `key` now (the admin API; no lease, not counted as a
    /// lookup). None when Redis could not be asked.
    pub async fn inspect(&self, key: &CacheKey) -> Option<Option<Object>> {
        let keys = UrlKeys::new(&self.prefix, &key.primary());
        let get = self
            .remote
            .command(vec![b"GET".to_vec(), keys.meta(key.variant)]);
        let record = self.call(self.read_timeout, get).await?.data();
        let Some(record) = record else {
            return Some(None);
        };
        Some(
            layout::decode(key, record)
                .ok()
                .map(layout::SharedMeta::head_only),
        )
    }

    /// The URL's `Vary` names and the variants its index lists (the admin API). None when
    /// Redis could not be asked.
    pub async fn variants(&self, primary: &CacheKey) -> Option<(Vec<HeaderName>, Vec<u64>)> {
        let keys = UrlKeys::new(&self.prefix, primary);
        let get = self.remote.command(vec![b"HGETALL".to_vec(), keys.index()]);
        let reply = self.call(self.read_timeout, get).await?;
        let (mut names, mut variants) = (Vec::new(), Vec::new());
        for pair in reply.array().chunks(2) {
            if let [Reply::Data(field), _] = pair {
                if &field[..] == b"names" {
                    if let Some(v) = pair[1].clone().data() {
                        names = parse_names(&v);
                    }
                } else if let Some(v) = std::str::from_utf8(field)
                    .ok()
                    .and_then(|f| u64::from_str_radix(f, 16).ok())
                {
                    variants.push(v);
                }
            }
        }
        Some((names, variants))
    }
}
