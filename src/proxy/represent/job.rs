//! What the queue of representations carries: one job, and the levels it is encoded at.

use std::sync::Arc;

use crate::cache::{CacheKey, Object};
use crate::http::accept_encoding::Coding;

/// One representation to build.
pub(super) struct Job {
    /// Where it is stored.
    pub(super) key: CacheKey,
    pub(super) coding: Coding,
    pub(super) source: Arc<Object>,
    pub(super) levels: Levels,
}

/// The levels a representation is encoded at.
#[derive(Clone, Copy)]
pub(super) struct Levels {
    pub(super) br: u32,
    pub(super) zstd: u32,
    /// The gzip level of the job's media type (`[compression] levels`).
    pub(super) gzip: u32,
}
