//! The disk engine: one preallocated file of fixed-size regions, the in-memory index
//! (key hash → region, offset, length, expiry), recovery at start-up and reads.
//!
//! Architecture invariant: eviction and expiry never scan directories or read objects; the
//! writer reclaims whole regions chosen from the in-memory bookkeeping ([`RegionBook`]), and
//! recovery reads region headers and summaries (one region without a summary is scanned by its
//! 64-byte entry headers), never a body.

mod index;
mod read;

pub(super) use index::Batch;

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::HeaderName;

use super::bans::read_bans;
use super::format::{
    self, BAN_SLOT, BLOCK, BanRecord, DATA_START, EntryInfo, SUMMARY_RECORD, Superblock, Trailer,
};
use crate::cache::CacheKey;
use crate::stats::Counters;

/// Entries up to this length are read whole on a hit (and promoted to memory); longer ones are
/// streamed from disk in [`format::BODY_CHUNK`] pieces.
pub const INLINE_MAX: u64 = 1 << 20;

/// Where an object is on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub region: u32,
    pub offset: u32,
    pub len: u32,
    /// The region incarnation the entry belongs to.
    pub seq: u64,
    pub expires_ms: u64,
    /// Every body chunk of this entry has been checked once since start-up.
    pub verified: bool,
}

/// The writer's bookkeeping for one region (never read from disk after recovery).
#[derive(Clone, Debug, Default)]
pub struct RegionBook {
    /// Incarnation; 0 = free.
    pub seq: u64,
    /// Hashes of the objects written in this incarnation (for reclaim).
    pub hashes: Vec<u64>,
    pub tombstones: u32,
    pub max_expires_ms: u64,
    /// Entries written, for the summary.
    pub entries: Vec<EntryInfo>,
    /// Key records of the variant and tagged entries written (the summary's second part).
    pub vary: Vec<u8>,
    /// Next write offset within the region (block aligned once flushed).
    pub cursor: u64,
    pub sealed: bool,
}

impl RegionBook {
    /// Bytes the summary of this region takes so far.
    pub fn summary_bytes(&self) -> u64 {
        (self.entries.len() * SUMMARY_RECORD + self.vary.len()) as u64
    }
}

/// What recovery hands to the writer.
pub struct Recovered {
    pub books: Vec<RegionBook>,
    pub next_seq: u64,
    pub objects: u64,
    pub elapsed: Duration,
    /// The persisted ban list, oldest position first, and its generation.
    pub bans: Vec<BanRecord>,
    pub ban_generation: u64,
    /// Variant keys still indexed and the `Vary` names of each, in write order.
    pub variants: Vec<(CacheKey, Vec<HeaderName>)>,
    /// URLs (primary keys) of indexed objects with surrogate keys, and their tags.
    pub tagged: Vec<(CacheKey, Vec<String>)>,
}

/// Why the ban list could not be written.
#[derive(Debug)]
pub enum BanWriteError {
    /// It does not fit [`BAN_SLOT`].
    Full,
    Io(io::Error),
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

const INDEX_SHARDS: usize = 64;

/// One shard of the index. The hasher is the memory tier's (foldhash, seeded per process):
/// several times cheaper than SipHash on a `u64` — 310,000 inserts at each recovery — and
/// still keyed, so URLs chosen to collide in the (public) xxh3 key hash do not collide here.
type Shard = HashMap<u64, Loc, foldhash::fast::RandomState>;

pub struct Engine {
    pub(super) file: File,
    pub region_size: u64,
    pub regions: u32,
    pub instance: u64,
    shards: Box<[Mutex<Shard>]>,
    /// Current incarnation of each region (0 while free or being reclaimed). Readers compare it
    /// before and after reading, so a region reused under them is noticed.
    region_seq: Box<[AtomicU64]>,
    /// Bytes of indexed entries per region.
    region_live: Box<[AtomicU64]>,
    objects: AtomicU64,
    live_bytes: AtomicU64,
    pub counters: Arc<Counters>,
}

impl Engine {
    /// Opens (or creates and preallocates) the data file and rebuilds the index from it.
    pub fn open(
        path: &Path,
        size: u64,
        region_size: u64,
        counters: Arc<Counters>,
    ) -> io::Result<(Engine, Recovered)> {
        let started = Instant::now();
        let regions = (size / region_size) as u32;
        let file_len = DATA_START + regions as u64 * region_size;
        let file = open_locked(path)?;
        let existing = read_superblock(&file, path, region_size, regions, file_len, &counters);
        // The ban list: without an intact copy nothing on disk can be trusted not to be banned.
        let existing = existing.and_then(|sb| match read_bans(&file, sb.instance, &counters) {
            Some(bans) => Some((sb, bans)),
            None => {
                counters.disk_reset.inc();
                tracing::error!(path = %path.display(), "disk cache ban list unreadable (both copies); starting empty rather than serve objects a lost ban may cover");
                None
            }
        });
        let fresh = existing.is_none();
        let (sb, (ban_generation, bans)) = match existing {
            Some(found) => found,
            None => (
                initialise(&file, region_size, regions, file_len)?,
                (0, Vec::new()),
            ),
        };
        let engine = Engine {
            file,
            region_size,
            regions,
            instance: sb.instance,
            shards: (0..INDEX_SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            region_seq: (0..regions).map(|_| AtomicU64::new(0)).collect(),
            region_live: (0..regions).map(|_| AtomicU64::new(0)).collect(),
            objects: AtomicU64::new(0),
            live_bytes: AtomicU64::new(0),
            counters,
        };
        let mut recovered = if fresh {
            Recovered {
                books: vec![RegionBook::default(); regions as usize],
                next_seq: 1,
                objects: 0,
                elapsed: Duration::ZERO,
                bans: Vec::new(),
                ban_generation: 0,
                variants: Vec::new(),
                tagged: Vec::new(),
            }
        } else {
            engine.recover()?
        };
        let mut bans = bans;
        bans.sort_by_key(|b| b.pos);
        recovered.bans = bans;
        recovered.ban_generation = ban_generation;
        recovered.elapsed = started.elapsed();
        recovered.objects = engine.objects.load(Ordering::Relaxed);
        Ok((engine, recovered))
    }

    /// File offset of region `r`.
    pub fn region_base(&self, r: u32) -> u64 {
        DATA_START + r as u64 * self.region_size
    }

    /// Asks the kernel to read `len` bytes at `offset` into the page cache in the background
    /// (`POSIX_FADV_WILLNEED`), so that the reads that follow find them there.
    pub(super) fn prefetch(&self, offset: u64, len: u64) {
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: advice on a valid descriptor this engine owns; no memory is shared with the
        // kernel and the call cannot change the file. Failure only loses the read-ahead.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                offset,
                len,
                libc::POSIX_FADV_WILLNEED,
            );
        }
    }

    /// Writes the ban list: copy A, sync, copy B, sync, so that at every moment one copy is
    /// intact and a single corrupted copy never loses a ban. Returns bytes written.
    pub fn write_bans(&self, generation: u64, bans: &[BanRecord]) -> Result<u64, BanWriteError> {
        let buf =
            format::encode_bans(self.instance, generation, bans).ok_or(BanWriteError::Full)?;
        for at in [BLOCK, BLOCK + BAN_SLOT] {
            self.file
                .write_all_at(&buf, at)
                .map_err(BanWriteError::Io)?;
            self.file.sync_data().map_err(BanWriteError::Io)?;
        }
        Ok(2 * buf.len() as u64)
    }

    /// Largest entry (header, key, meta, body) one region can hold.
    pub fn max_entry(&self) -> u64 {
        self.region_size - 3 * BLOCK
    }

    pub fn capacity(&self) -> u64 {
        self.regions as u64 * self.region_size
    }

    pub fn objects(&self) -> u64 {
        self.objects.load(Ordering::Relaxed)
    }

    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }

    pub fn region_live(&self, r: u32) -> u64 {
        self.region_live[r as usize].load(Ordering::Relaxed)
    }

    pub fn set_region_seq(&self, r: u32, seq: u64) {
        self.region_seq[r as usize].store(seq, Ordering::SeqCst);
    }

    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    /// Starts write-back of a range just written, without waiting for it
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that the `fdatasync` when a region is
    /// sealed finds little left: otherwise that one call writes back the whole region (16 MiB
    /// by default) in one long stretch of kernel work on the writer's core. Best effort.
    pub fn start_writeback(&self, offset: u64, len: u64) {
        // SAFETY: sync_file_range on a valid, owned descriptor; it only starts I/O.
        unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }

    /// Releases the file lock after a clean close, so a new instance may open the file while
    /// this one's last readers finish (nothing writes any more).
    pub fn unlock(&self) {
        // SAFETY: flock on a valid, owned descriptor.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }

    #[cfg(test)]
    pub fn raw_fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// Writes the summary of `entries` (then the key records) at `cursor` and the trailer;
    /// returns bytes written.
    pub fn write_summary(
        &self,
        r: u32,
        seq: u64,
        cursor: u64,
        entries: &[EntryInfo],
        vary: &[u8],
    ) -> io::Result<u64> {
        let mut summary = Vec::with_capacity(entries.len() * SUMMARY_RECORD + vary.len());
        for e in entries {
            e.encode_into(&mut summary);
        }
        summary.extend_from_slice(vary);
        let summary_len = summary.len() as u32;
        let hash = format::checksum(&summary);
        let cursor = format::align_up(cursor, BLOCK);
        let padded = format::align_up(summary.len() as u64, BLOCK);
        if cursor + padded > self.region_size - BLOCK {
            return Err(io::Error::other("summary does not fit the region"));
        }
        let count = entries.len();
        summary.resize(padded as usize, 0);
        let base = self.region_base(r);
        self.file.write_all_at(&summary, base + cursor)?;
        let trailer = Trailer {
            index: r,
            seq,
            instance: self.instance,
            summary_offset: cursor as u32,
            entries: count as u32,
            summary_len,
            summary_hash: hash,
        };
        self.file
            .write_all_at(&trailer.encode(), base + self.region_size - BLOCK)?;
        self.file.sync_data()?;
        Ok(padded + BLOCK)
    }
}

/// Opens (creating it if missing) the data file and takes its exclusive lock.
fn open_locked(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    // SAFETY: flock on a valid, owned descriptor; no memory is shared with the kernel.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("{} is locked by another process ({e})", path.display()),
        ));
    }
    Ok(file)
}

/// The file's superblock if the file can be read with this layout (`regions` of
/// `region_size`, `file_len` bytes, this format version); otherwise `None`, counted in
/// `disk_reset` and logged (a new, empty file is `None` silently).
fn read_superblock(
    file: &File,
    path: &Path,
    region_size: u64,
    regions: u32,
    file_len: u64,
    counters: &Counters,
) -> Option<Superblock> {
    let mut head = vec![0u8; BLOCK as usize];
    // A new (empty) file.
    file.read_exact_at(&mut head, 0).ok()?;
    match (Superblock::decode(&head), Superblock::version_of(&head)) {
        (Some(s), _)
            if s.region_size == region_size
                && s.regions == regions
                && file.metadata().is_ok_and(|m| m.len() >= file_len) =>
        {
            return Some(s);
        }
        (Some(_), _) => {
            tracing::warn!(path = %path.display(), "disk cache size or region_size changed; starting empty");
        }
        (None, Some(v)) if v != format::FORMAT_VERSION => {
            tracing::warn!(path = %path.display(), version = v, "disk cache file has format version {v}, this build reads version {}; starting empty", format::FORMAT_VERSION);
        }
        (None, _) => {
            tracing::warn!(path = %path.display(), "disk cache file unreadable (no valid superblock); starting empty");
        }
    }
    counters.disk_reset.inc();
    None
}

/// Makes `file` an empty cache of `regions` regions: preallocated, empty ban lists, then a
/// new superblock (last, so a file is only ever read with intact ban lists).
fn initialise(
    file: &File,
    region_size: u64,
    regions: u32,
    file_len: u64,
) -> io::Result<Superblock> {
    let sb = Superblock {
        region_size,
        regions,
        instance: random_instance(),
    };
    preallocate(file, file_len)?;
    file.write_all_at(&[0u8; BLOCK as usize], 0)?;
    let empty = format::encode_bans(sb.instance, 0, &[])
        .ok_or_else(|| io::Error::other("empty ban list does not fit"))?;
    file.write_all_at(&empty, BLOCK)?;
    file.write_all_at(&empty, BLOCK + BAN_SLOT)?;
    file.sync_all()?;
    file.write_all_at(&sb.encode(), 0)?;
    file.sync_all()?;
    Ok(sb)
}

/// Reserves the whole file so later writes cannot fail for lack of space (a full filesystem is
/// found at start-up, not in the middle of serving).
fn preallocate(file: &File, len: u64) -> io::Result<()> {
    let Ok(len_off) = libc::off_t::try_from(len) else {
        return Err(io::Error::other("disk cache size too large"));
    };
    // Refuse up front rather than let a partial fallocate eat the filesystem's free space.
    let allocated = {
        use std::os::unix::fs::MetadataExt;
        file.metadata()?.blocks() * 512
    };
    // SAFETY: `statvfs` is a C struct of integers (and padding), for which all zero bytes
    // are a valid value.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatvfs on a descriptor `file` owns; it writes one `statvfs` through a pointer
    // to the live local above.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut vfs) } == 0 {
        let available = (vfs.f_bavail as u64).saturating_mul(vfs.f_frsize as u64);
        if len.saturating_sub(allocated) > available {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "not enough free space for the disk cache: {} needed, {} available",
                    crate::config::units::format_size(len.saturating_sub(allocated)),
                    crate::config::units::format_size(available)
                ),
            ));
        }
    }
    // SAFETY: fallocate on a valid, owned descriptor with in-range arguments.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len_off) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
        // Filesystems without fallocate (rare): a sparse file of the right length.
        return file.set_len(len);
    }
    Err(e)
}

fn random_instance() -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let local = 0u8;
    let seed = format!("{t}:{}:{:p}", std::process::id(), &local);
    format::checksum(seed.as_bytes()).max(1)
}
