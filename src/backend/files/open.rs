//! Opening a file under the document root, and the bounded cache of open files (nginx's
//! `open_file_cache`). A path is opened as it is (links inside it followed by the kernel),
//! then the file actually opened is checked: where it really is (`/proc/self/fd`, so a link
//! swapped in between the check and the open cannot escape) must be under the root unless
//! `follow_symlinks`; only regular files and directories are served (a FIFO, a device or a
//! socket is not found: they are opened non-blocking, so a FIFO cannot hang a worker). The
//! real path also says what the file is by name (`Opened::named`): a link `a.txt -> x.php`
//! opens a script, which the lookup refuses like `/x.php` (`scripts.rs`). With `sniff` (a
//! files origin with `send_scripts = false` and `sniff_scripts`), a regular file named like
//! an ordinary one has its first bytes read once, here (`pread`, the offset untouched): PHP
//! source makes it `Named::Source`, kept with the descriptor in the open-file cache.
//! Runs on tokio's blocking pool: every call here may wait for the disk.

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use super::scripts::{self, Named};

/// A file or directory opened under the root.
pub(crate) struct Opened {
    pub file: File,
    pub dir: bool,
    /// What it really is by name (`scripts.rs`): a link `a.txt -> x.php` is a script.
    pub named: Named,
}

/// What the file is now (read with `fstat` on every request, so a file changed in place is
/// seen at once even while its descriptor is kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub len: u64,
    pub modified: SystemTime,
    /// Nanoseconds of `modified` since the epoch, and the inode: the ETag.
    pub mtime_ns: i128,
    pub ino: u64,
}

impl Stat {
    pub fn of(file: &File) -> io::Result<Stat> {
        let m = file.metadata()?;
        Ok(Stat {
            len: m.len(),
            modified: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ino: m.ino(),
        })
    }
}

/// Why a path gives no file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// Not there (or a loop of links, a name too long): 404.
    NotFound,
    /// There, but really outside the root (a symbolic link out, `follow_symlinks = false`):
    /// 404.
    Outside,
    /// There, but neither a regular file nor a directory (a FIFO, a device, a socket): 404.
    Special,
    /// There, but this process may not read it: 403.
    Forbidden,
    /// Another error of the file system (I/O error, too many open files): 500.
    Failed,
}

/// Opens `relative` (names joined with `/`, already checked by `path.rs`) under `root`
/// (canonical); with `sniff`, a regular file's first bytes say whether it is PHP source.
pub(crate) fn open(
    root: &Path,
    relative: &str,
    follow_symlinks: bool,
    sniff: bool,
) -> Result<Opened, Missing> {
    let full = if relative.is_empty() {
        root.to_path_buf()
    } else {
        root.join(relative)
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(&full)
        .map_err(|e| missing(&e))?;
    let meta = file.metadata().map_err(|e| missing(&e))?;
    let dir = meta.is_dir();
    if !dir && !meta.is_file() {
        return Err(Missing::Special);
    }
    let real = real_path(&file);
    if !follow_symlinks && !inside(root, real.as_deref().ok_or(Missing::Failed)?) {
        return Err(Missing::Outside);
    }
    // Where it really is names it: a link with another name to a script is a script. Without
    // `/proc` (only with `follow_symlinks`, else refused above) the name asked for decides.
    let mut named = real.map_or(Named::Plain, |r| scripts::real_named(root, &r));
    if sniff
        && !dir
        && named == Named::Plain
        && scripts::starts_as_source(&file).map_err(|e| missing(&e))?
    {
        named = Named::Source;
    }
    Ok(Opened { file, dir, named })
}

pub(crate) fn missing(e: &io::Error) -> Missing {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => Missing::NotFound,
        io::ErrorKind::PermissionDenied => Missing::Forbidden,
        _ if e.raw_os_error() == Some(libc::ELOOP)
            || e.raw_os_error() == Some(libc::ENAMETOOLONG) =>
        {
            Missing::NotFound
        }
        _ => Missing::Failed,
    }
}

/// Where an open file really is.
fn real_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

fn inside(root: &Path, real: &Path) -> bool {
    real == root || real.starts_with(root)
}

/// Counters of the open-file cache (`/backends`).
#[derive(Default)]
pub(crate) struct CacheStats {
    pub hit: AtomicU64,
    pub miss: AtomicU64,
    pub expired: AtomicU64,
    /// Entries pushed out to keep the cache within `open_file_cache`.
    pub evicted: AtomicU64,
    /// Names directory listings left out as not served (`listing.rs`).
    pub listing_omitted: AtomicU64,
    /// Names directory listings did not list, past their bounds (`listing.rs`).
    pub listing_unlisted: AtomicU64,
}

type Entry = (Instant, Result<Arc<Opened>, Missing>);

/// Tells evictions from replacements: quick_cache reports the entry an insert replaces (an
/// expired one looked up again) as evicted too.
#[derive(Clone, Copy, Default)]
pub(crate) struct CountEvictions;

/// One insert: the key going in, and the other entries it pushed out.
#[derive(Default)]
pub(crate) struct Inserting<K> {
    key: K,
    evicted: u64,
}

impl<K: PartialEq + Default, V> quick_cache::Lifecycle<K, V> for CountEvictions {
    type RequestState = Inserting<K>;

    fn on_evict(&self, state: &mut Inserting<K>, key: K, _: V) {
        if key != state.key {
            state.evicted += 1;
        }
    }
}

/// A bounded cache whose evictions are counted (`kept`, `insert_counted`).
pub(crate) type Kept<K, V> = quick_cache::sync::Cache<
    K,
    V,
    quick_cache::UnitWeighter,
    quick_cache::DefaultHashBuilder,
    CountEvictions,
>;

/// Inserts `value` under `key`, adding the other entries it pushed out to `evicted`.
pub(crate) fn insert_counted<K, V>(cache: &Kept<K, V>, key: K, value: V, evicted: &AtomicU64)
where
    K: Eq + std::hash::Hash + Clone + Default,
    V: Clone,
{
    let mut inserting = Inserting {
        key: key.clone(),
        evicted: 0,
    };
    cache.insert_with_lifecycle(key, value, &mut inserting);
    if inserting.evicted > 0 {
        evicted.fetch_add(inserting.evicted, Ordering::Relaxed);
    }
}

/// A cache of at most `capacity` entries. quick_cache divides its capacity among shards
/// (four per CPU, fewer for a small capacity: each holds at least 32), rounding each share
/// up: it is given the shards and a capacity that is a multiple of them, so the entries kept
/// never exceed `capacity` (up to one per shard fewer).
pub(crate) fn kept<K, V>(capacity: usize) -> Kept<K, V>
where
    K: Eq + std::hash::Hash + Clone + Default,
    V: Clone,
{
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut shards = cpus.saturating_mul(4).next_power_of_two();
    while shards > 1 && capacity / shards < 32 {
        shards /= 2;
    }
    let weight = (capacity - capacity % shards) as u64;
    let lifecycle = CountEvictions;
    let options = quick_cache::OptionsBuilder::new()
        .estimated_items_capacity(capacity)
        .weight_capacity(weight)
        .shards(shards)
        .build();
    match options {
        Ok(o) => Kept::with_options(
            o,
            quick_cache::UnitWeighter,
            quick_cache::DefaultHashBuilder::default(),
            lifecycle,
        ),
        // Not for these options (only allocations out of range are refused).
        Err(_) => Kept::with(
            capacity,
            weight,
            quick_cache::UnitWeighter,
            quick_cache::DefaultHashBuilder::default(),
            lifecycle,
        ),
    }
}

/// Open files and "not found" answers by relative path, each trusted for `valid`, at most
/// `capacity` of them (least recently used out first).
pub(crate) struct OpenCache {
    root: PathBuf,
    follow_symlinks: bool,
    /// Read each regular file's first bytes for PHP source (`open`).
    sniff: bool,
    valid: Duration,
    cache: Option<Kept<String, Entry>>,
    pub stats: CacheStats,
}

impl OpenCache {
    pub fn new(
        root: PathBuf,
        follow_symlinks: bool,
        sniff: bool,
        capacity: usize,
        valid: Duration,
    ) -> Self {
        let stats = CacheStats::default();
        let cache = (capacity > 0).then(|| kept(capacity));
        OpenCache {
            root,
            follow_symlinks,
            sniff,
            valid,
            cache,
            stats,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether files opened are read for PHP source.
    pub fn sniffs(&self) -> bool {
        self.sniff
    }

    /// `relative` opened, from the cache while its entry is valid.
    pub fn open(&self, relative: &str) -> Result<Arc<Opened>, Missing> {
        let Some(cache) = &self.cache else {
            self.stats.miss.fetch_add(1, Ordering::Relaxed);
            return open(&self.root, relative, self.follow_symlinks, self.sniff).map(Arc::new);
        };
        if let Some((at, found)) = cache.get(relative) {
            if at.elapsed() < self.valid {
                self.stats.hit.fetch_add(1, Ordering::Relaxed);
                return found;
            }
            self.stats.expired.fetch_add(1, Ordering::Relaxed);
        }
        self.stats.miss.fetch_add(1, Ordering::Relaxed);
        let found = open(&self.root, relative, self.follow_symlinks, self.sniff).map(Arc::new);
        // A failure of the moment (EMFILE, EIO) is not remembered.
        if found.as_ref().err() != Some(&Missing::Failed) {
            insert_counted(
                cache,
                relative.to_string(),
                (Instant::now(), found.clone()),
                &self.stats.evicted,
            );
        }
        found
    }

    /// Entries kept right now.
    pub fn len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache never keeps more than `open_file_cache` entries, whatever the shards make of
    /// it, and counts every entry it pushes out.
    #[test]
    fn the_open_file_cache_keeps_at_most_its_capacity_and_counts_evictions() {
        let root = std::env::temp_dir();
        for capacity in [1, 5, 33, 1001, 4099] {
            let cache = OpenCache::new(
                root.clone(),
                false,
                false,
                capacity,
                Duration::from_secs(60),
            );
            let asked = capacity * 3;
            for i in 0..asked {
                let missing = format!("shellac-open-cache-test-{}-{i}", std::process::id());
                assert_eq!(cache.open(&missing).err(), Some(Missing::NotFound));
            }
            let evicted = cache.stats.evicted.load(Ordering::Relaxed) as usize;
            assert!(cache.len() <= capacity, "{capacity}: {}", cache.len());
            assert!(
                cache.len() + 32 >= capacity.min(asked),
                "{capacity}: {}",
                cache.len()
            );
            assert_eq!(cache.len() + evicted, asked, "{capacity}");
        }
        // An expired entry looked up again replaces itself: not an eviction.
        let cache = OpenCache::new(root, false, false, 10, Duration::ZERO);
        for _ in 0..5 {
            assert!(cache.open("shellac-open-cache-test-again").is_err());
        }
        assert_eq!(cache.stats.expired.load(Ordering::Relaxed), 4);
        assert_eq!(cache.stats.evicted.load(Ordering::Relaxed), 0);
        assert_eq!(cache.len(), 1);
    }
}
