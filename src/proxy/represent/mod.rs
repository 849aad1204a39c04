//! br and zstd representations of hot stored objects, built in the background
//! (`[compression] encodings`, docs/compression.md), and the identity of a hot stored gzip
//! object for clients without gzip (its hits send stored bytes, not a gunzip per hit).
//! Never on the request path: a hit by a client that prefers br or zstd to gzip (or takes
//! no gzip) counts towards the object's heat; at `hot_hits`
//! the object is queued (bounded: `queue`, one more is dropped and counted), and one task
//! builds the queue's representations one after another, the encoding itself on the
//! blocking pool (brotli at quality 11 is ~1-2 MB/s). A representation is stored as an
//! object of its own under a key derived from the object's (`cache/representation.rs`),
//! with the object's lifetimes, its `ETag` weakened and `Vary: Accept-Encoding`, so it is
//! kept in every tier, purged with the URL, and served only while the object it was made
//! from is the one being served.

mod encode;
mod job;
mod worker;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::cache::representation;
use crate::cache::{Cache, CacheKey, KeyRef, NeedsIo, Object};
use crate::config::compression::{CompressionConfig, Encoding};
use crate::http::accept_encoding::{Accepts, Coding};
use crate::stats::Counters;
use job::{Job, Levels};
use worker::Worker;

/// Objects counted for heat, at most (a bounded table: the least used are forgotten).
const HEAT_ENTRIES: usize = 16_384;

/// What [`Representations::lookup`] found.
pub enum Found {
    /// A representation made from the object's bytes, from memory.
    Rep(Arc<Object>),
    /// None in memory: the tiers below may hold one under this key.
    NeedsIo(CacheKey),
    /// None (the hit counted towards building one).
    Absent,
}

/// The representations of one configuration: the heat table, the queue and its worker.
pub struct Representations {
    codings: Vec<Coding>,
    /// A stored gzip object gets an identity representation for clients without gzip
    /// (`[compression] enabled`): its hits then send bytes as stored, not decoded per hit.
    identity: bool,
    hot_hits: u32,
    heat: quick_cache::sync::Cache<CacheKey, u32>,
    tx: mpsc::Sender<Job>,
    /// Taken by the worker, started with the first job (a `Proxy` is also built outside a
    /// runtime).
    rx: Mutex<Option<mpsc::Receiver<Job>>>,
    /// Keys queued or being built: each is queued once.
    queued: Arc<Mutex<HashSet<CacheKey>>>,
    levels: Levels,
    /// `[compression]`, for the gzip level of a job's media type.
    levels_by_type: CompressionConfig,
    /// The largest identity body decoded to be encoded (`cache.max_object_size`).
    max_identity: u64,
}

impl Representations {
    pub fn new(config: &CompressionConfig, max_identity: u64) -> Representations {
        let (tx, rx) = mpsc::channel(config.queue.max(1) as usize);
        let codings = if config.enabled {
            [Coding::Zstd, Coding::Br]
                .into_iter()
                .filter(|c| {
                    config.encodings.iter().any(|e| match e {
                        Encoding::Br => *c == Coding::Br,
                        Encoding::Zstd => *c == Coding::Zstd,
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        Representations {
            codings,
            identity: config.enabled,
            hot_hits: config.hot_hits.max(1),
            heat: quick_cache::sync::Cache::new(HEAT_ENTRIES),
            tx,
            rx: Mutex::new(Some(rx)),
            queued: Arc::default(),
            levels: Levels {
                br: config.br_level.clamp(1, 11),
                zstd: config.zstd_level.clamp(1, 19),
                gzip: config.gzip_level,
            },
            levels_by_type: config.clone(),
            max_identity,
        }
    }

    /// Whether any coding is configured.
    pub fn enabled(&self) -> bool {
        !self.codings.is_empty()
    }

    /// Whether a hot stored gzip object gets an identity representation.
    pub fn builds_identity(&self) -> bool {
        self.identity
    }

    /// The coding a client prefers among the configured ones and gzip, when a representation
    /// serves it: one of the configured ones, gzip for an identity `source`, identity for a
    /// gzip `source` and a client that takes none of them (`None`: the object as stored
    /// serves it).
    pub fn preferred(&self, accepts: &Accepts, source_gzip: bool) -> Option<Coding> {
        if !self.codings.is_empty() {
            // The configured codings and gzip, on the stack (a clone of the list allocated).
            let mut at_hand = [Coding::Gzip; 5];
            let n = self.codings.len().min(at_hand.len() - 1);
            at_hand[..n].copy_from_slice(&self.codings[..n]);
            if let Some(c) = accepts.choose(&at_hand[..n + 1]) {
                return (c != Coding::Gzip || !source_gzip).then_some(c);
            }
        }
        (self.identity && source_gzip && !accepts.accepts(Coding::Gzip)).then_some(Coding::Identity)
    }

    /// The representation in `coding` of `source` (stored under `key`) when the tiers
    /// without I/O (memory) hold one made from these very bytes; `NeedsIo` when they hold
    /// none and a tier below (disk) must be asked ([`Representations::lookup_io`]); else
    /// `Absent`, the hit counted towards building one.
    pub fn lookup(
        &self,
        cache: &Arc<Cache>,
        counters: &Arc<Counters>,
        key: &CacheKey,
        source: &Arc<Object>,
        coding: Coding,
    ) -> Found {
        let rep_key = representation::key(key, coding);
        match cache.lookup_now(&rep_key) {
            Ok(found) => match self.found(cache, counters, rep_key, source, coding, found) {
                Some(rep) => Found::Rep(rep),
                None => Found::Absent,
            },
            Err(NeedsIo) => Found::NeedsIo(rep_key),
        }
    }

    /// The representation in `coding` memory holds for the object stored under `key`,
    /// whatever bytes it was made from (the caller compares the generations: a fast hit,
    /// with the ones its `Prepared`s remember); `None` with nothing counted or removed: a
    /// fast hit then steps aside and the full path's [`Representations::lookup`] does both.
    /// The caller that sends it counts `compress_encoded_served`.
    pub fn stored(&self, cache: &Cache, key: KeyRef<'_>, coding: Coding) -> Option<Arc<Object>> {
        let variant = representation::variant(key.variant, coding);
        cache.lookup_now_ref(key.with_variant(variant)).ok()?
    }

    /// After [`Representations::lookup`] said `NeedsIo`: the representation stored under
    /// `rep_key` in the tiers below (read back from disk after a restart or once memory
    /// evicted it, and promoted to memory like any object; counted in
    /// `compress_encoded_read_back`), when made from `source`'s bytes.
    pub async fn lookup_io(
        &self,
        cache: &Arc<Cache>,
        counters: &Arc<Counters>,
        rep_key: CacheKey,
        source: &Arc<Object>,
        coding: Coding,
    ) -> Option<Arc<Object>> {
        let found = cache.lookup_io(&rep_key).await;
        let rep = self.found(cache, counters, rep_key, source, coding, found)?;
        counters.compress_encoded_read_back.inc();
        Some(rep)
    }

    /// `found` when it was made from `source`; one made from older bytes is removed (it
    /// would never be served again). Otherwise counts the hit towards building one.
    fn found(
        &self,
        cache: &Arc<Cache>,
        counters: &Arc<Counters>,
        rep_key: CacheKey,
        source: &Arc<Object>,
        coding: Coding,
        found: Option<Arc<Object>>,
    ) -> Option<Arc<Object>> {
        if let Some(rep) = found {
            if representation::source(&rep) == Some(representation::generation(source)) {
                counters.compress_encoded_served.inc();
                return Some(rep);
            }
            cache.storage.remove(&rep_key);
        }
        let hits = self.heat.get(&rep_key).unwrap_or(0) + 1;
        if hits < self.hot_hits {
            self.heat.insert(rep_key, hits);
            return None;
        }
        self.heat.remove(&rep_key);
        self.enqueue(cache, counters, rep_key, coding, source.clone());
        None
    }

    fn enqueue(
        &self,
        cache: &Arc<Cache>,
        counters: &Arc<Counters>,
        key: CacheKey,
        coding: Coding,
        source: Arc<Object>,
    ) {
        let Ok(mut queued) = self.queued.lock() else {
            return;
        };
        if queued.contains(&key) {
            return;
        }
        let gzip = source
            .headers
            .values("content-type")
            .next()
            .map_or(self.levels.gzip, |t| self.levels_by_type.gzip_level_for(t));
        let job = Job {
            key: key.clone(),
            coding,
            source,
            levels: Levels {
                gzip,
                ..self.levels
            },
        };
        match self.tx.try_send(job) {
            Ok(()) => {
                queued.insert(key);
            }
            Err(_) => {
                counters.compress_encode_dropped.inc();
                return;
            }
        }
        drop(queued);
        self.start(cache, counters);
    }

    /// Starts the worker once, on the runtime of the request that queued the first job.
    fn start(&self, cache: &Arc<Cache>, counters: &Arc<Counters>) {
        let Some(rx) = self.rx.lock().ok().and_then(|mut rx| rx.take()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let worker = Worker {
            cache: cache.clone(),
            counters: counters.clone(),
            queued: self.queued.clone(),
            max_identity: self.max_identity,
        };
        runtime.spawn(worker.run(rx));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use encode::{ZSTD_WINDOW_LOG, encode, gunzip};
    use std::io::{Read, Write};

    fn page() -> Vec<u8> {
        (0..2000)
            .map(|i| format!("<li class=\"row\">item {i}</li>\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn br_and_zstd_round_trip_and_zstd_keeps_an_8mb_window() {
        let page = page();
        let levels = Levels {
            br: 11,
            zstd: 19,
            gzip: 6,
        };
        let br = encode(Coding::Br, levels, &page).expect("br");
        let mut back = Vec::new();
        brotli::Decompressor::new(&br[..], 4096)
            .read_to_end(&mut back)
            .expect("valid br");
        assert_eq!(back, page);
        let zstd = encode(Coding::Zstd, levels, &page).expect("zstd");
        assert_eq!(zstd::decode_all(&zstd[..]).expect("valid zstd"), page);
        // RFC 9659: a decoder with an 8 MB window limit reads it.
        let mut d = zstd::stream::Decoder::new(&zstd[..]).unwrap();
        d.window_log_max(ZSTD_WINDOW_LOG).unwrap();
        let mut back = Vec::new();
        d.read_to_end(&mut back).expect("within an 8 MB window");
        assert_eq!(back, page);
        assert!(br.len() < page.len() / 5 && zstd.len() < page.len() / 5);
    }

    #[test]
    fn a_gzip_bomb_is_not_decoded_past_the_limit() {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&vec![0u8; 1 << 20]).unwrap();
        let bomb = e.finish().unwrap();
        assert!(gunzip(&bomb, 1000).is_none());
        assert_eq!(gunzip(&bomb, 1 << 20).map(|v| v.len()), Some(1 << 20));
    }

    #[test]
    fn clients_get_the_coding_they_prefer_among_those_at_hand() {
        let r = Representations::new(&CompressionConfig::default(), 1 << 20);
        let pick = |ae: &str| r.preferred(&Accepts::parse([ae.as_bytes()]), true);
        assert_eq!(pick("gzip, deflate, br, zstd"), Some(Coding::Zstd));
        assert_eq!(pick("gzip, deflate, br"), Some(Coding::Br));
        assert_eq!(pick("gzip"), None);
        assert_eq!(pick("br;q=0.5, gzip"), None, "gzip preferred");
        assert_eq!(pick("br;q=1, zstd;q=0.9"), Some(Coding::Br));
        let off = Representations::new(
            &CompressionConfig {
                encodings: Vec::new(),
                ..CompressionConfig::default()
            },
            1 << 20,
        );
        // A client without gzip gets a stored gzip's identity representation, encodings or
        // not; none with `[compression]` off.
        assert_eq!(
            off.preferred(&Accepts::parse([&b"zstd"[..]]), true),
            Some(Coding::Identity)
        );
        assert_eq!(pick(""), Some(Coding::Identity));
        assert_eq!(pick("identity"), Some(Coding::Identity));
        let disabled = Representations::new(
            &CompressionConfig {
                enabled: false,
                ..CompressionConfig::default()
            },
            1 << 20,
        );
        assert_eq!(disabled.preferred(&Accepts::parse([&b""[..]]), true), None);
        // An identity object: a gzip client gets a gzip representation.
        let from_identity = |ae: &str| r.preferred(&Accepts::parse([ae.as_bytes()]), false);
        assert_eq!(from_identity("gzip"), Some(Coding::Gzip));
        assert_eq!(from_identity("gzip, br"), Some(Coding::Br));
        assert_eq!(from_identity("identity"), None);
    }
}
