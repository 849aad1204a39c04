//! A body left on disk, as a stored object holds it: where it is (region, incarnation,
//! offset, length, chunk checksums) and the tier that reads it, behind [`ChunkSource`] so the
//! object names no disk engine (`disk/engine.rs` implements it).

use std::sync::Arc;

use bytes::Bytes;

/// Why a read produced no object.
#[derive(Debug)]
pub enum ReadError {
    /// Checksum or format mismatch: the entry is dropped and the object fetched again.
    Corrupt(&'static str),
    Io(std::io::Error),
    /// The region was reclaimed while reading; a plain miss.
    Gone,
}

/// Where a body is on disk.
#[derive(Clone, Debug)]
pub struct DiskLocation {
    /// The key hash of the entry (to drop it from the index when corrupt).
    pub hash: u64,
    pub region: u32,
    /// The region incarnation the entry belongs to.
    pub seq: u64,
    /// Absolute file offset of the body.
    pub offset: u64,
    pub len: u64,
    /// The checksum of each chunk.
    pub hashes: Arc<[u64]>,
}

/// What reads a body on disk: the disk tier.
pub trait ChunkSource: Send + Sync {
    /// False once the region holding the body has been reclaimed.
    fn is_current(&self, at: &DiskLocation) -> bool;
    /// Reads and verifies chunk `i` (blocking).
    fn read_chunk(&self, at: &DiskLocation, i: usize) -> Result<Bytes, ReadError>;
    /// Accounts for a failed read while streaming: corrupt entries are counted and dropped.
    fn report(&self, at: &DiskLocation, e: &ReadError);
}

/// A large body left on disk and read chunk by chunk; each chunk is checked against its
/// checksum before it is handed out.
#[derive(Clone)]
pub struct DiskBody {
    source: Arc<dyn ChunkSource>,
    at: DiskLocation,
}

impl std::fmt::Debug for DiskBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskBody")
            .field("region", &self.at.region)
            .field("offset", &self.at.offset)
            .field("len", &self.at.len)
            .finish()
    }
}

impl DiskBody {
    /// The body at `at`, read by `source`.
    pub fn new(source: Arc<dyn ChunkSource>, at: DiskLocation) -> DiskBody {
        DiskBody { source, at }
    }

    pub fn chunks(&self) -> usize {
        self.at.hashes.len()
    }

    /// False once the region holding the body has been reclaimed.
    pub fn is_current(&self) -> bool {
        self.source.is_current(&self.at)
    }

    /// Reads and verifies chunk `i` (blocking).
    pub fn read_chunk(&self, i: usize) -> Result<Bytes, ReadError> {
        self.source.read_chunk(&self.at, i)
    }

    /// Accounts for a failed read while streaming: corrupt entries are counted and dropped.
    pub fn report(&self, e: &ReadError) {
        self.source.report(&self.at, e)
    }
}
