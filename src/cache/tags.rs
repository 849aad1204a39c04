//! Surrogate keys: objects tagged by their `Surrogate-Key` or `xkey` response header can be
//! purged by tag in one request. The index maps a tag to the URLs (primary keys) carrying it;
//! it is bounded in tags and URLs per tag, and may name URLs already evicted or replaced
//! (purging those is harmless).

use std::sync::{Arc, Mutex};

use super::{CacheKey, StoredFields};

/// Tags remembered at most (least recently used ones are dropped first).
pub const MAX_TAGS: usize = 262_144;
/// URLs remembered per tag at most; more are not indexed (counted by the caller).
pub const MAX_KEYS_PER_TAG: usize = 16_384;

/// Header fields whose space-separated values are an object's tags.
pub const TAG_FIELDS: [&str; 2] = ["surrogate-key", "xkey"];

/// The tags of a response.
pub fn tags_of(headers: &StoredFields) -> Vec<String> {
    tags_from(
        TAG_FIELDS
            .iter()
            .flat_map(|f| headers.values(f).map(move |v| (*f, v))),
    )
}

/// The tags of a response whose fields are in a map (metadata read back from disk).
pub fn tags_of_map(headers: &http::HeaderMap) -> Vec<String> {
    tags_from(TAG_FIELDS.iter().flat_map(|f| {
        headers
            .get_all(*f)
            .into_iter()
            .map(move |v| (*f, v.as_bytes()))
    }))
}

/// The keys of a list: separated by spaces, and — as vmod_xkey reads its `xkey` field and
/// the keys given to `xkey.purge()` — by commas too where `commas` (`Surrogate-Key` keys are
/// space-separated only).
pub fn split_keys(list: &str, commas: bool) -> impl Iterator<Item = &str> {
    list.split(move |c: char| c.is_ascii_whitespace() || (commas && c == ','))
        .filter(|k| !k.is_empty())
}

fn tags_from<'a>(values: impl Iterator<Item = (&'static str, &'a [u8])>) -> Vec<String> {
    let mut out: Vec<String> = values
        .filter_map(|(f, v)| std::str::from_utf8(v).ok().map(|v| (f, v)))
        .flat_map(|(f, v)| split_keys(v, f == "xkey"))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Tag → URLs.
pub struct TagIndex {
    map: quick_cache::sync::Cache<String, Arc<Mutex<Vec<CacheKey>>>>,
    /// (URL, tag) pairs not indexed because the tag already had `MAX_KEYS_PER_TAG` URLs.
    pub dropped: std::sync::atomic::AtomicU64,
}

impl Default for TagIndex {
    fn default() -> Self {
        TagIndex {
            map: quick_cache::sync::Cache::new(MAX_TAGS),
            dropped: Default::default(),
        }
    }
}

impl TagIndex {
    /// Records that `primary` carries `tags`. Returns how many tag entries were full.
    pub fn add(&self, primary: &CacheKey, tags: &[String]) -> usize {
        let mut dropped = 0;
        for tag in tags {
            let keys = match self.map.get(tag) {
                Some(k) => k,
                None => {
                    let k = Arc::new(Mutex::new(Vec::new()));
                    self.map.insert(tag.clone(), k.clone());
                    k
                }
            };
            let mut keys = keys.lock().unwrap_or_else(|p| p.into_inner());
            if keys.contains(primary) {
                continue;
            }
            if keys.len() >= MAX_KEYS_PER_TAG {
                dropped += 1;
                self.dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            keys.push(primary.clone());
        }
        dropped
    }

    /// The URLs that carry `tag`, which stays indexed (a soft purge leaves the objects).
    pub fn urls(&self, tag: &str) -> Vec<CacheKey> {
        match self.map.get(tag) {
            Some(keys) => keys.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            None => Vec::new(),
        }
    }

    /// Forgets `tag` and returns the URLs that carried it.
    pub fn take(&self, tag: &str) -> Vec<CacheKey> {
        match self.map.remove(tag) {
            Some((_, keys)) => std::mem::take(&mut *keys.lock().unwrap_or_else(|p| p.into_inner())),
            None => Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vmod_xkey reads `xkey: a,b c` as three keys; `Surrogate-Key` keys are split on
    /// spaces only.
    #[test]
    fn xkey_lists_split_on_commas_too() {
        let mut h = http::HeaderMap::new();
        h.insert("xkey", "a,b  c,".parse().unwrap());
        h.insert("surrogate-key", "d,e f".parse().unwrap());
        assert_eq!(tags_of_map(&h), ["a", "b", "c", "d,e", "f"]);
        assert_eq!(split_keys(" x, y ", true).collect::<Vec<_>>(), ["x", "y"]);
    }

    #[test]
    fn tags_from_both_fields() {
        let mut h = http::HeaderMap::new();
        h.insert("surrogate-key", "product-1 category-9".parse().unwrap());
        h.insert("xkey", "product-1 front".parse().unwrap());
        assert_eq!(
            tags_of(&StoredFields::from_map(&h)),
            vec!["category-9", "front", "product-1"]
        );
    }

    #[test]
    fn index_and_take() {
        let idx = TagIndex::default();
        let a = CacheKey::new("h", "/a");
        let b = CacheKey::new("h", "/b");
        idx.add(&a, &["t".into()]);
        idx.add(&b, &["t".into(), "u".into()]);
        idx.add(&b, &["t".into()]);
        assert_eq!(idx.take("t"), vec![a, b.clone()]);
        assert!(idx.take("t").is_empty());
        assert_eq!(idx.take("u"), vec![b]);
    }
}
