//! The shared tier: a cache every node of a fleet reads and fills, on Redis Cluster, below the
//! memory and disk tiers (`[storage.shared]`).
//!
//! - A request's local miss asks it (only the local leader of a key does, `proxy/fsm.rs`)
//!   before the origin: [`SharedTier::lookup`], which also takes the fleet lease on fetching
//!   the key or waits, bounded by `lease_timeout`, for the node that holds it.
//! - A node that fetched a cacheable object writes it once, in the background
//!   ([`SharedTier::share`]): chunks first, then the metadata committed by a script that
//!   refuses a fill that raced a purge (`scripts.rs`). Objects over `max_object_size` and
//!   bodies on disk stay local.
//! - Invalidations are applied here and on every other node (`feed.rs`).
//!
//! Every operation has a deadline and goes through the circuit breaker (`breaker.rs`):
//! Redis slow, failing over or gone costs a request at most a deadline per operation it waits
//! for (a lookup; the chunks of a large body; a second lookup for a URL with `Vary`), then
//! nothing while the breaker is open — the node works as a single Shellac and recovers by
//! itself.

pub mod auth;
pub mod breaker;
mod broadcast;
mod entry;
pub mod feed;
mod follow;
pub mod layout;
mod local;
mod lookup;
mod purge;
pub mod remote;
pub mod scripts;
mod start;
mod tier;
pub mod tls;
mod writer;

pub use local::LocalTiers;
pub use lookup::{SharedFound, Ticket};
pub use tier::SharedTier;

#[cfg(test)]
mod tests;
