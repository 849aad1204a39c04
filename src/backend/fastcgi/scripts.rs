//! What a path names under a document root — a file, a directory, neither — as a request's
//! script is found (`FastCgi::resolve`): looked up on disk the way static files are
//! (`files::open`: inside the root, links checked) and kept, at most `open_file_cache`
//! answers each for `open_file_cache_valid` (nginx's `open_file_cache`, which its
//! `try_files` checks in front of `fastcgi_pass` use). While a request's answers are kept its
//! script is found on the async thread: no disk lookup, no trip to the blocking pool (two
//! thread wake-ups, four system calls: ~45 µs of Shellac's ~220 µs of CPU per `phpinfo()`
//! page, bench/RESULTS.md "phpinfo per CPU-second").

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::backend::files::open::{self, CacheStats, Missing};

/// What a path names under the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Is {
    File,
    Dir,
    /// Nothing that can be run or listed: missing, outside the root, unreadable, another kind
    /// of file, or a failure of the moment (which is not kept).
    Nothing,
}

/// The kept answers, by full path.
pub(super) struct Scripts {
    cache: Option<open::Kept<PathBuf, (Instant, Is)>>,
    valid: Duration,
    pub stats: CacheStats,
}

impl Scripts {
    /// At most `capacity` answers (0: none kept, every lookup on disk), each for `valid`.
    pub fn new(capacity: usize, valid: Duration) -> Scripts {
        Scripts {
            // Sized as the files backend's: never more than `capacity`, evictions counted.
            cache: (capacity > 0).then(|| open::kept(capacity)),
            valid,
            stats: CacheStats::default(),
        }
    }

    /// The kept answer for `relative` under `root` while it is valid; `None` when only the
    /// disk can say. Never blocks; not counted (the caller counts its [`Scripts::hits`] once
    /// it used them).
    pub fn cached(&self, root: &Path, relative: &str) -> Option<Is> {
        let cache = self.cache.as_ref()?;
        let (at, is) = cache.get(&full(root, relative))?;
        (at.elapsed() < self.valid).then_some(is)
    }

    /// Counts `n` answers taken from [`Scripts::cached`].
    pub fn hits(&self, n: u64) {
        if n > 0 {
            self.stats.hit.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// `relative` under `root` looked up on disk (blocking), and kept.
    pub fn look(&self, root: &Path, relative: &str) -> Is {
        self.stats.miss.fetch_add(1, Ordering::Relaxed);
        let found = open::open(root, relative, false, false);
        let is = match &found {
            Ok(o) if o.dir => Is::Dir,
            Ok(_) => Is::File,
            Err(_) => Is::Nothing,
        };
        if let Some(cache) = &self.cache {
            let key = full(root, relative);
            if cache.get(&key).is_some() {
                self.stats.expired.fetch_add(1, Ordering::Relaxed);
            }
            // A failure of the moment (EMFILE, EIO) is not remembered.
            if found.err() != Some(Missing::Failed) {
                open::insert_counted(cache, key, (Instant::now(), is), &self.stats.evicted);
            }
        }
        is
    }

    /// Answers kept right now.
    pub fn len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.len())
    }
}

fn full(root: &Path, relative: &str) -> PathBuf {
    if relative.is_empty() {
        root.to_path_buf()
    } else {
        root.join(relative)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers are kept for `valid`: a script removed or added is seen after it (as nginx's
    /// `open_file_cache_valid`), and nothing is kept with a capacity of 0.
    #[test]
    fn answers_are_kept_while_valid() {
        let dir = std::env::temp_dir().join(format!("shellac-fcgi-scripts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("blog")).unwrap();
        std::fs::write(dir.join("a.php"), "").unwrap();
        let root = std::fs::canonicalize(&dir).unwrap();
        let scripts = Scripts::new(100, Duration::from_secs(3600));
        assert_eq!(scripts.cached(&root, "a.php"), None);
        assert_eq!(scripts.look(&root, "a.php"), Is::File);
        assert_eq!(scripts.look(&root, "blog"), Is::Dir);
        assert_eq!(scripts.look(&root, "b.php"), Is::Nothing);
        std::fs::remove_file(dir.join("a.php")).unwrap();
        std::fs::write(dir.join("b.php"), "").unwrap();
        assert_eq!(scripts.cached(&root, "a.php"), Some(Is::File));
        assert_eq!(scripts.cached(&root, "blog"), Some(Is::Dir));
        assert_eq!(scripts.cached(&root, "b.php"), Some(Is::Nothing));
        assert_eq!(scripts.len(), 3);
        assert_eq!(scripts.stats.miss.load(Ordering::Relaxed), 3);
        assert_eq!(scripts.stats.expired.load(Ordering::Relaxed), 0);

        let expired = Scripts::new(100, Duration::ZERO);
        assert_eq!(expired.look(&root, "b.php"), Is::File);
        assert_eq!(expired.cached(&root, "b.php"), None);
        assert_eq!(expired.look(&root, "b.php"), Is::File);
        assert_eq!(expired.stats.expired.load(Ordering::Relaxed), 1);
        assert_eq!(expired.look(&root, "a.php"), Is::Nothing);

        let none = Scripts::new(0, Duration::from_secs(3600));
        assert_eq!(none.look(&root, "b.php"), Is::File);
        assert_eq!(none.cached(&root, "b.php"), None);
        assert_eq!(none.len(), 0);

        // At most `capacity` answers, what is pushed out counted (the files backend's sizing).
        let small = Scripts::new(40, Duration::from_secs(3600));
        for n in 0..100 {
            small.look(&root, &format!("missing-{n}.php"));
        }
        let evicted = small.stats.evicted.load(Ordering::Relaxed) as usize;
        assert!(small.len() <= 40, "{} kept", small.len());
        assert_eq!(small.len() + evicted, 100, "every answer kept or counted");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
