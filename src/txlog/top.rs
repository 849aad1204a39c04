//! `shellac top`: requests, misses and bytes per URL, host, backend, user agent and site over
//! a sliding window, like varnishtop, for all requests or one `[[site]]`'s. Fed by the writer
//! thread (never the request path), one bucket per second, every bucket bounded.

use std::collections::{HashMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

use super::decision::DecisionKind;
use super::record::Record;

/// Seconds of history kept; the longest window `/top` can show.
pub const MAX_WINDOW: u64 = 60;

/// Distinct keys per dimension in one bucket; further ones are counted under [`OTHER`].
const MAX_KEYS: usize = 10_000;

/// Sites with their own rankings in one bucket; requests of further ones are ranked only among
/// all requests.
const MAX_SITES: usize = 256;

/// The key that collects everything beyond [`MAX_KEYS`].
pub const OTHER: &str = "(other)";

/// Longest key kept (URLs are cut there).
const MAX_KEY_LEN: usize = 256;

/// What to rank by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dimension {
    Url,
    Host,
    Backend,
    UserAgent,
    /// The `[[site]]` that answered (`-` without one).
    Site,
}

/// One map per [`Dimension`], in [`Dimension::ALL`] order.
type Maps = [HashMap<String, Counts>; 5];

impl Dimension {
    pub const ALL: [Dimension; 5] = [
        Dimension::Url,
        Dimension::Host,
        Dimension::Backend,
        Dimension::UserAgent,
        Dimension::Site,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Url => "url",
            Dimension::Host => "host",
            Dimension::Backend => "backend",
            Dimension::UserAgent => "ua",
            Dimension::Site => "site",
        }
    }

    pub fn parse(s: &str) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|d| d.as_str() == s)
    }

    fn key(self, r: &Record) -> String {
        let mut key = match self {
            // The host too: `/` of two sites is two URLs (as `shellac log` prints them).
            Dimension::Url => format!("{}{}", r.host(), r.target()),
            Dimension::Host => r.host().to_string(),
            Dimension::Backend => r.backend().unwrap_or("-").to_string(),
            Dimension::UserAgent => r.user_agent().unwrap_or("-").to_string(),
            Dimension::Site => r.site().unwrap_or("-").to_string(),
        };
        if key.len() > MAX_KEY_LEN {
            let mut cut = MAX_KEY_LEN;
            while !key.is_char_boundary(cut) {
                cut -= 1;
            }
            key.truncate(cut);
        }
        key
    }
}

/// Totals for one key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub requests: u64,
    /// Responses not served from the cache (miss, pass, synth).
    pub misses: u64,
    pub bytes: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.requests += o.requests;
        self.misses += o.misses;
        self.bytes += o.bytes;
    }
}

struct Bucket {
    second: u64,
    maps: Maps,
    /// The same for the requests of each site (at most [`MAX_SITES`]).
    sites: HashMap<String, Maps>,
}

/// Adds `one` under `key` in `map`, or under [`OTHER`] once the map holds [`MAX_KEYS`].
fn count(map: &mut HashMap<String, Counts>, key: String, one: &Counts) {
    let key = if map.len() >= MAX_KEYS && !map.contains_key(&key) {
        OTHER.to_string()
    } else {
        key
    };
    map.entry(key).or_default().add(one);
}

/// The sliding window.
#[derive(Default)]
pub struct Top {
    buckets: VecDeque<Bucket>,
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Top {
    /// Counts one transaction in the bucket of the second it finished.
    pub fn add(&mut self, r: &Record) {
        let second = unix_seconds(r.time + r.duration);
        let one = Counts {
            requests: 1,
            misses: u64::from(r.decision.kind != DecisionKind::Hit),
            bytes: r.bytes,
        };
        let bucket = match self.buckets.iter_mut().position(|b| b.second == second) {
            Some(i) => &mut self.buckets[i],
            None => {
                self.buckets.push_back(Bucket {
                    second,
                    maps: Default::default(),
                    sites: HashMap::new(),
                });
                let newest = self
                    .buckets
                    .iter()
                    .map(|b| b.second)
                    .max()
                    .unwrap_or(second);
                self.expire(newest);
                match self.buckets.iter_mut().position(|b| b.second == second) {
                    Some(i) => &mut self.buckets[i],
                    None => return,
                }
            }
        };
        let site = r
            .site()
            .filter(|s| bucket.sites.len() < MAX_SITES || bucket.sites.contains_key(*s));
        let mut site_maps = site.map(|s| bucket.sites.entry(s.to_string()).or_default());
        for (i, d) in Dimension::ALL.into_iter().enumerate() {
            let key = d.key(r);
            if let Some(maps) = site_maps.as_mut() {
                count(&mut maps[i], key.clone(), &one);
            }
            count(&mut bucket.maps[i], key, &one);
        }
    }

    /// Forgets buckets older than [`MAX_WINDOW`] seconds before `newest`.
    fn expire(&mut self, newest: u64) {
        self.buckets.retain(|b| b.second + MAX_WINDOW > newest);
    }

    /// The `n` keys of `by` with the most `sort` over the last `window` seconds before `now`,
    /// among all requests or (`site`) those one site answered.
    pub fn rank(
        &self,
        by: Dimension,
        sort: fn(&Counts) -> u64,
        window: u64,
        n: usize,
        now: SystemTime,
        site: Option<&str>,
    ) -> Vec<(String, Counts)> {
        let now = unix_seconds(now);
        let from = now.saturating_sub(window.min(MAX_WINDOW));
        let i = Dimension::ALL.iter().position(|d| *d == by).unwrap_or(0);
        let mut merged: HashMap<&str, Counts> = HashMap::new();
        for b in self.buckets.iter().filter(|b| b.second > from) {
            let maps = match site {
                None => &b.maps,
                Some(s) => match b.sites.get(s) {
                    Some(maps) => maps,
                    None => continue,
                },
            };
            for (k, c) in &maps[i] {
                merged.entry(k.as_str()).or_default().add(c);
            }
        }
        let mut rows: Vec<(String, Counts)> = merged
            .into_iter()
            .map(|(k, c)| (k.to_string(), c))
            .collect();
        rows.sort_by(|a, b| sort(&b.1).cmp(&sort(&a.1)).then_with(|| a.0.cmp(&b.0)));
        rows.truncate(n);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txlog::decision::Decision;
    use std::time::Duration;

    fn rec(path: &'static str, hit: bool, bytes: u64, at: SystemTime) -> Record {
        let mut r = Record::sample();
        r.set_uri(&http::Uri::from_static(path));
        r.bytes = bytes;
        r.time = at;
        r.duration = Duration::ZERO;
        r.decision = Decision {
            kind: if hit {
                DecisionKind::Hit
            } else {
                DecisionKind::Miss
            },
            reason: None,
        };
        r
    }

    #[test]
    fn ranks_over_a_sliding_window() {
        let now = SystemTime::now();
        let mut top = Top::default();
        for _ in 0..3 {
            top.add(&rec("/a", true, 10, now));
        }
        top.add(&rec("/b", false, 1000, now));
        // Outside a 10 s window but inside 60 s.
        for _ in 0..5 {
            top.add(&rec("/old", false, 1, now - Duration::from_secs(30)));
        }
        let by_req = top.rank(Dimension::Url, |c| c.requests, 10, 10, now, None);
        assert_eq!(
            by_req.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["example.com/a", "example.com/b"],
            "issue 32: top URLs name their host"
        );
        assert_eq!(
            by_req[0].1,
            Counts {
                requests: 3,
                misses: 0,
                bytes: 30
            }
        );
        let by_bytes = top.rank(Dimension::Url, |c| c.bytes, 10, 1, now, None);
        assert_eq!(by_bytes[0].0, "example.com/b");
        let wide = top.rank(Dimension::Url, |c| c.misses, 60, 10, now, None);
        assert_eq!(wide[0].0, "example.com/old");
        let hosts = top.rank(Dimension::Host, |c| c.requests, 60, 10, now, None);
        assert_eq!(
            hosts,
            vec![(
                "example.com".to_string(),
                Counts {
                    requests: 9,
                    misses: 6,
                    bytes: 1035
                }
            )]
        );
        // Much later: everything expired.
        top.add(&rec("/new", true, 1, now + Duration::from_secs(600)));
        assert_eq!(top.buckets.len(), 1);
    }

    /// Issue 31: `shellac top --site NAME` ranks the requests one site answered, and
    /// `--by site` ranks the sites.
    #[test]
    fn ranks_one_sites_requests_and_the_sites() {
        let now = SystemTime::now();
        let mut top = Top::default();
        for (path, site) in [
            ("/a", Some("blog")),
            ("/a", Some("blog")),
            ("/b", Some("shop")),
            ("/c", None),
        ] {
            let mut r = rec(path, false, 1, now);
            r.set_site(site);
            top.add(&r);
        }
        let keys = |rows: Vec<(String, Counts)>| -> Vec<(String, u64)> {
            rows.into_iter().map(|(k, c)| (k, c.requests)).collect()
        };
        assert_eq!(
            keys(top.rank(Dimension::Url, |c| c.requests, 60, 10, now, Some("blog"))),
            [("example.com/a".to_string(), 2)]
        );
        assert_eq!(
            keys(top.rank(Dimension::Url, |c| c.requests, 60, 10, now, Some("shop"))),
            [("example.com/b".to_string(), 1)]
        );
        assert!(
            top.rank(Dimension::Url, |c| c.requests, 60, 10, now, Some("none"))
                .is_empty()
        );
        assert_eq!(
            keys(top.rank(Dimension::Site, |c| c.requests, 60, 10, now, None)),
            [
                ("blog".to_string(), 2),
                ("-".to_string(), 1),
                ("shop".to_string(), 1)
            ]
        );
    }

    #[test]
    fn keys_per_bucket_are_bounded() {
        let now = SystemTime::now();
        let mut top = Top::default();
        for i in 0..(MAX_KEYS + 50) {
            let mut r = rec("/", true, 1, now);
            r.set_uri(&format!("/k{i}").parse().unwrap());
            top.add(&r);
        }
        let rows = top.rank(Dimension::Url, |c| c.requests, 60, 1, now, None);
        assert_eq!(
            rows[0],
            (
                OTHER.to_string(),
                Counts {
                    requests: 50,
                    misses: 0,
                    bytes: 50
                }
            )
        );
    }
}
