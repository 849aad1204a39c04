//! Directors: named groups of backends (or other directors) and how one is picked for a
//! request. Every policy skips sick backends and the ones a request already tried.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::HeaderMap;

use super::Backend;
use crate::cache::CacheKey;
use crate::config::{Config, DirectorConfig, DirectorKind, HashOn};
use crate::stats::Counters;

/// A director member.
#[derive(Clone)]
pub enum Member {
    Backend(Arc<Backend>),
    Director(Arc<Director>),
}

impl Member {
    pub fn name(&self) -> &str {
        match self {
            Member::Backend(b) => b.name(),
            Member::Director(d) => &d.config.name,
        }
    }

    /// True if some backend below is healthy.
    pub fn healthy(&self) -> bool {
        match self {
            Member::Backend(b) => b.health.is_healthy(),
            Member::Director(d) => d.members.iter().any(Member::healthy),
        }
    }

    /// True if some backend below is healthy and not held off for `key` by saint mode.
    pub fn healthy_for(&self, key: &CacheKey) -> bool {
        match self {
            Member::Backend(b) => b.health.is_healthy() && b.saint.allows(key),
            Member::Director(d) => d.members.iter().any(|m| m.healthy_for(key)),
        }
    }

    /// A healthy backend not in `ctx.exclude` (nor held off for the key by saint mode), by
    /// this member's policy.
    pub fn pick(&self, ctx: &Pick<'_>) -> Option<Arc<Backend>> {
        match self {
            Member::Backend(b) => {
                (b.health.is_healthy() && !ctx.excluded(b) && b.saint.allows(ctx.key))
                    .then(|| b.clone())
            }
            Member::Director(d) => d.pick(ctx),
        }
    }

    /// No backend at all (VCL's `backend x none;`): a director without members, so a fetch
    /// routed to it fails with 503 (`no-healthy-backend`).
    pub fn none() -> Member {
        Member::Director(Arc::new(Director {
            config: DirectorConfig {
                name: "none".to_string(),
                kind: DirectorKind::Fallback,
                backends: Vec::new(),
                hash_on: None,
                restart_on: Vec::new(),
                restart_unless: Vec::new(),
                max_restarts: 0,
                member_weights: Vec::new(),
            },
            members: Vec::new(),
            weights: Vec::new(),
            seeds: Vec::new(),
            hash_on: HashOn::Key,
            next: AtomicUsize::new(0),
        }))
    }

    /// The director's config when this is a director (restart rules live there).
    pub fn director(&self) -> Option<&DirectorConfig> {
        match self {
            Member::Director(d) => Some(&d.config),
            Member::Backend(_) => None,
        }
    }
}

/// What a pick may look at.
pub struct Pick<'a> {
    pub key: &'a CacheKey,
    pub headers: &'a HeaderMap,
    pub client: IpAddr,
    /// Backends this request already tried (retries and restarts go elsewhere).
    pub exclude: &'a [Arc<Backend>],
    /// What a hash director hashes instead of its `hash_on` (VCL's `hash.backend(key)`).
    pub hash: Option<u64>,
    /// Varnish 2.1's `hash` and `client` directors (a 2.x VCL program's): a hash director
    /// takes the member at this point (0 .. 2^32) of its members' cumulative weights, as
    /// Varnish 2.1 does, instead of rendezvous hashing — see [`legacy_draw`].
    pub draw: Option<u32>,
}

impl Pick<'_> {
    fn excluded(&self, b: &Arc<Backend>) -> bool {
        self.exclude.iter().any(|e| Arc::ptr_eq(e, b))
    }

    fn eligible(&self, m: &Member) -> bool {
        match m {
            Member::Backend(b) => {
                b.health.is_healthy() && !self.excluded(b) && b.saint.allows(self.key)
            }
            Member::Director(_) => m.healthy_for(self.key),
        }
    }
}

/// A named group with a selection policy.
pub struct Director {
    pub config: DirectorConfig,
    pub members: Vec<Member>,
    weights: Vec<u32>,
    seeds: Vec<u64>,
    hash_on: HashOn,
    next: AtomicUsize,
}

impl Director {
    fn pick(&self, ctx: &Pick<'_>) -> Option<Arc<Backend>> {
        match self.config.kind {
            DirectorKind::Fallback => self.members.iter().find_map(|m| m.pick(ctx)),
            DirectorKind::RoundRobin => {
                let n = self.members.len();
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                (0..n).find_map(|i| self.members[(start + i) % n].pick(ctx))
            }
            DirectorKind::Random => {
                let mut candidates: Vec<(usize, u32)> = self
                    .members
                    .iter()
                    .enumerate()
                    .filter(|(i, m)| self.weights[*i] > 0 && ctx.eligible(m))
                    .map(|(i, _)| (i, self.weights[i]))
                    .collect();
                while !candidates.is_empty() {
                    let total: u64 = candidates.iter().map(|(_, w)| *w as u64).sum();
                    let mut r = random() % total;
                    let pos = candidates
                        .iter()
                        .position(|(_, w)| {
                            if r < *w as u64 {
                                true
                            } else {
                                r -= *w as u64;
                                false
                            }
                        })
                        .unwrap_or(0);
                    let (i, _) = candidates.swap_remove(pos);
                    if let Some(b) = self.members[i].pick(ctx) {
                        return Some(b);
                    }
                }
                None
            }
            DirectorKind::Hash => {
                if let Some(draw) = ctx.draw
                    && let Some(b) = self.pick_drawn(draw, ctx)
                {
                    return Some(b);
                }
                let h = self.request_hash(ctx);
                if !self.config.member_weights.is_empty() {
                    return self.pick_weighted(h, ctx);
                }
                // Rendezvous hashing: highest score among eligible members wins; removing a
                // member moves only the keys it won.
                let mut order: Vec<(u64, usize)> = self
                    .seeds
                    .iter()
                    .enumerate()
                    .map(|(i, seed)| (mix(h ^ seed), i))
                    .collect();
                order.sort_unstable_by(|a, b| b.cmp(a));
                order
                    .into_iter()
                    .find_map(|(_, i)| self.members[i].pick(ctx))
            }
        }
    }

    /// A hash director whose members a VCL program weighted (`hash.add_backend(b, w)`):
    /// weighted rendezvous hashing — each member scores `w / -ln(u)` for its own uniform
    /// draw `u` from the key, the highest eligible score wins — so a member gets keys in
    /// proportion to its weight, as in Varnish's hash director, and a sick member's keys
    /// move to the others while everyone else's stay where they were.
    fn pick_weighted(&self, h: u64, ctx: &Pick<'_>) -> Option<Arc<Backend>> {
        let mut order: Vec<(f64, usize)> = self
            .seeds
            .iter()
            .enumerate()
            .filter(|(i, _)| self.weights[*i] > 0)
            .map(|(i, seed)| {
                // 53 random bits, centred in their interval so `u` is never 0 or 1.
                let u = ((mix(h ^ seed) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                (f64::from(self.weights[i]) / -u.ln(), i)
            })
            .collect();
        order.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
        order
            .into_iter()
            .find_map(|(_, i)| self.members[i].pick(ctx))
    }

    /// Varnish 2.1's choice for a hash or client director: `draw / 2^32` of the members'
    /// total weight falls on one member (the members laid end to end by weight, in order);
    /// it is taken if it can be (healthy, not tried). Otherwise `None`, and the rendezvous
    /// order among the others decides — where Varnish 2.1 drew at random among the healthy
    /// ones, this keeps a key on one backend while its own is down.
    fn pick_drawn(&self, draw: u32, ctx: &Pick<'_>) -> Option<Arc<Backend>> {
        let total: f64 = self.weights.iter().map(|w| f64::from(*w)).sum();
        let point = f64::from(draw) / 4_294_967_296.0 * total;
        let mut upto = 0.0;
        for (i, w) in self.weights.iter().enumerate() {
            upto += f64::from(*w);
            if point < upto {
                return self.members[i].pick(ctx);
            }
        }
        None
    }

    /// What this director hashes when it is a hash director.
    pub fn hash_source(&self) -> Option<&HashOn> {
        (self.config.kind == DirectorKind::Hash).then_some(&self.hash_on)
    }

    fn request_hash(&self, ctx: &Pick<'_>) -> u64 {
        if let Some(h) = ctx.hash {
            return mix(h);
        }
        let mut h = FixedHasher::default();
        match &self.hash_on {
            HashOn::Key => ctx.key.hash(&mut h),
            HashOn::ClientIp => ctx.client.hash(&mut h),
            HashOn::Header(name) => {
                ctx.headers
                    .get(name.as_str())
                    .map(|v| v.as_bytes())
                    .hash(&mut h);
            }
            HashOn::Cookie(name) => cookie(ctx.headers, name).hash(&mut h),
        }
        h.finish()
    }
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}

/// Varnish 2.1's draw for its hash and client directors: the first four bytes, read
/// little-endian, of the SHA-256 of `input` — for a hash director the request's hash inputs
/// each followed by `#` (`/url#host#` with the built-in vcl_hash), for a client director
/// `client.identity` or, unset, the client's address as text.
pub fn legacy_draw(input: &[u8]) -> u32 {
    let digest = ring::digest::digest(&ring::digest::SHA256, input);
    let d = digest.as_ref();
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

/// A hasher with a fixed key, so hash directors map keys the same way across restarts and
/// across a fleet of nodes.
#[derive(Default)]
struct FixedHasher(u64);

impl Hasher for FixedHasher {
    fn finish(&self) -> u64 {
        mix(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        // FNV-1a
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// splitmix64 finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A per-thread xorshift generator (no shared state on the request path).
fn random() -> u64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(std::collections::hash_map::RandomState::new().hash_one(0u8) | 1);
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    })
}

/// Every backend and director, and where requests go by default.
pub struct Backends {
    pub backends: Vec<Arc<Backend>>,
    pub directors: Vec<Arc<Director>>,
    pub default: Member,
}

impl Backends {
    /// The backend or director called `name`.
    pub fn get(&self, name: &str) -> Option<Member> {
        self.directors
            .iter()
            .find(|d| d.config.name == name)
            .map(|d| Member::Director(d.clone()))
            .or_else(|| {
                self.backends
                    .iter()
                    .find(|b| b.name() == name)
                    .map(|b| Member::Backend(b.clone()))
            })
    }

    /// Builds the runtime objects from a validated config.
    pub fn build(config: &Config, counters: &Arc<Counters>) -> Backends {
        Backends::build_reusing(config, counters, None)
    }

    /// Like [`Backends::build`], but a backend whose settings did not change is taken over
    /// from `previous` (hot reload): its connection pool, health and counters carry on.
    pub fn build_reusing(
        config: &Config,
        counters: &Arc<Counters>,
        previous: Option<&Backends>,
    ) -> Backends {
        let backends: Vec<Arc<Backend>> = config
            .backends
            .iter()
            .map(|b| {
                previous
                    .and_then(|p| p.backends.iter().find(|old| old.same_setup(b, config)))
                    .cloned()
                    .unwrap_or_else(|| Backend::new(b.clone(), config, counters.clone()))
            })
            .collect();
        let configs: HashMap<&str, &DirectorConfig> = config
            .directors
            .iter()
            .map(|d| (d.name.as_str(), d))
            .collect();
        let mut built: HashMap<String, Member> = backends
            .iter()
            .map(|b| (b.name().to_string(), Member::Backend(b.clone())))
            .collect();
        // Weights from this configuration: a backend taken over from `previous` may carry
        // another (`Backend::same_setup` leaves weights out).
        let weights: HashMap<&str, u32> = config
            .backends
            .iter()
            .map(|b| (b.name.as_str(), b.weight))
            .collect();
        for d in &config.directors {
            resolve(&d.name, &configs, &weights, &mut built);
        }
        let directors = config
            .directors
            .iter()
            .filter_map(|d| match built.get(&d.name) {
                Some(Member::Director(d)) => Some(d.clone()),
                _ => None,
            })
            .collect();
        let default = config
            .default_target()
            .and_then(|name| built.get(name).cloned())
            .or_else(|| backends.first().map(|b| Member::Backend(b.clone())))
            // Only a VCL program may declare no backend (`backend default none;`).
            .unwrap_or_else(Member::none);
        Backends {
            backends,
            directors,
            default,
        }
    }
}

fn resolve(
    name: &str,
    configs: &HashMap<&str, &DirectorConfig>,
    weights: &HashMap<&str, u32>,
    built: &mut HashMap<String, Member>,
) -> Option<Member> {
    if let Some(m) = built.get(name) {
        return Some(m.clone());
    }
    let cfg = configs.get(name)?;
    let (members, weights): (Vec<Member>, Vec<u32>) = cfg
        .backends
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let member = resolve(m, configs, weights, built)?;
            let weight = match (cfg.member_weights.get(i), &member) {
                (Some(w), _) => *w,
                (None, Member::Backend(b)) => {
                    weights.get(b.name()).copied().unwrap_or(b.config.weight)
                }
                (None, Member::Director(_)) => 1,
            };
            Some((member, weight))
        })
        .unzip();
    let seeds = members
        .iter()
        .map(|m| {
            let mut h = FixedHasher::default();
            m.name().hash(&mut h);
            h.finish()
        })
        .collect();
    let director = Member::Director(Arc::new(Director {
        hash_on: cfg.hash_on(),
        config: (*cfg).clone(),
        members,
        weights,
        seeds,
        next: AtomicUsize::new(0),
    }));
    built.insert(name.to_string(), director.clone());
    Some(director)
}

#[cfg(test)]
mod tests;
