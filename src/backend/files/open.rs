//! Opening a file under the document root, and the bounded cache of open files (nginx's
//! `open_file_cache`). A path is opened as it is (links inside it followed by the kernel),
//! then the file actually opened is checked: where it really is (`/proc/self/fd`, so a link
//! swapped in between the check and the open cannot escape) must be under the root unless
//! `follow_symlinks`; only regular files and directories are served (a FIFO, a device or a
//! socket is not found: they are opened non-blocking, so a FIFO cannot hang a worker).
//! Runs on tokio's blocking pool: every call here may wait for the disk.

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// A file or directory opened under the root.
pub(crate) struct Opened {
    pub file: File,
    pub dir: bool,
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
    /// Not there, not a regular file or directory, or outside the root: 404.
    NotFound,
    /// There, but this process may not read it: 403.
    Forbidden,
    /// Another error of the file system (I/O error, too many open files): 500.
    Failed,
}

/// Opens `relative` (names joined with `/`, already checked by `path.rs`) under `root`
/// (canonical).
pub(crate) fn open(root: &Path, relative: &str, follow_symlinks: bool) -> Result<Opened, Missing> {
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
        return Err(Missing::NotFound);
    }
    if !follow_symlinks && !inside(root, &real_path(&file).ok_or(Missing::Failed)?) {
        return Err(Missing::NotFound);
    }
    Ok(Opened { file, dir })
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
}

type Entry = (Instant, Result<Arc<Opened>, Missing>);

/// Open files and "not found" answers by relative path, each trusted for `valid`, at most
/// `capacity` of them (least recently used out first).
pub(crate) struct OpenCache {
    root: PathBuf,
    follow_symlinks: bool,
    valid: Duration,
    cache: Option<quick_cache::sync::Cache<String, Entry>>,
    pub stats: CacheStats,
}

impl OpenCache {
    pub fn new(root: PathBuf, follow_symlinks: bool, capacity: usize, valid: Duration) -> Self {
        OpenCache {
            root,
            follow_symlinks,
            valid,
            cache: (capacity > 0).then(|| quick_cache::sync::Cache::new(capacity)),
            stats: CacheStats::default(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `relative` opened, from the cache while its entry is valid.
    pub fn open(&self, relative: &str) -> Result<Arc<Opened>, Missing> {
        let Some(cache) = &self.cache else {
            self.stats.miss.fetch_add(1, Ordering::Relaxed);
            return open(&self.root, relative, self.follow_symlinks).map(Arc::new);
        };
        if let Some((at, found)) = cache.get(relative) {
            if at.elapsed() < self.valid {
                self.stats.hit.fetch_add(1, Ordering::Relaxed);
                return found;
            }
            self.stats.expired.fetch_add(1, Ordering::Relaxed);
        }
        self.stats.miss.fetch_add(1, Ordering::Relaxed);
        let found = open(&self.root, relative, self.follow_symlinks).map(Arc::new);
        // A failure of the moment (EMFILE, EIO) is not remembered.
        if found.as_ref().err() != Some(&Missing::Failed) {
            cache.insert(relative.to_string(), (Instant::now(), found.clone()));
        }
        found
    }

    /// Entries kept right now.
    pub fn len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.len())
    }
}
