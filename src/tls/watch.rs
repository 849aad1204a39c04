//! Noticing that certificate, key, CA or ticket-key files changed on disk: each file's size,
//! modification time and inode, compared every `watch_interval`. Polling a handful of files
//! costs a few `stat` calls and needs nothing from the kernel but `stat`, whatever replaces
//! the files (an editor, certbot's symlink swap, a mounted secret's directory swap).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::reload::Live;

/// What a file looked like (None: it could not be read).
type Stamp = Option<(u64, i64, i64, u64)>;

/// The files a listener read and what each looked like then.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stamps(Vec<(PathBuf, Stamp)>);

fn stamp(path: &PathBuf) -> Stamp {
    // `metadata` follows symlinks: a swapped link target is a change.
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
}

impl Stamps {
    pub fn take(files: &[PathBuf]) -> Stamps {
        Stamps(files.iter().map(|f| (f.clone(), stamp(f))).collect())
    }

    /// Whether any file looks different now.
    pub fn changed(&self) -> bool {
        self.0.iter().any(|(f, s)| stamp(f) != *s)
    }
}

/// Watches the TLS listeners' files: a listener whose files changed is built again and
/// swapped in (as a reload would); one that does not load keeps running as it was (logged at
/// ERROR once per change of its files, counted in `tls_reload_error`).
pub async fn run(live: Arc<Live>, mut shutdown: watch::Receiver<bool>) {
    // The stamps of files that failed to load, per listener: tried again once they change.
    let mut failed: HashMap<Arc<str>, Stamps> = HashMap::new();
    let mut last: HashMap<Arc<str>, Instant> = HashMap::new();
    loop {
        let frontends = live.tls();
        let tick = frontends
            .iter()
            .map(|f| f.settings.watch_interval.0)
            .filter(|d| !d.is_zero())
            .min()
            .unwrap_or(Duration::from_secs(5))
            .max(Duration::from_millis(100));
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = shutdown.changed() => return,
        }
        let frontends = live.tls();
        for f in frontends.iter() {
            let interval = f.settings.watch_interval.0;
            let due = last.get(&f.name).is_none_or(|t| t.elapsed() >= interval);
            if interval.is_zero() || !due {
                continue;
            }
            last.insert(f.name.clone(), Instant::now());
            let now = Stamps::take(&f.settings.files());
            if now == f.stamps || failed.get(&f.name) == Some(&now) {
                continue;
            }
            let name = f.name.clone();
            let result = live.swap_tls(|running| running.rebuilt(&name)).await;
            let counters = live.load().counters.clone();
            match result {
                Ok(()) => {
                    failed.remove(&name);
                    counters.tls_reload.inc();
                    tracing::info!(listener = %name, "TLS files changed on disk: certificates loaded again");
                }
                Err(errors) => {
                    failed.insert(name.clone(), now);
                    counters.tls_reload_error.inc();
                    for e in errors {
                        tracing::error!(listener = %name, "TLS files changed on disk but cannot be loaded; the running certificates are kept: {e}");
                    }
                }
            }
        }
        failed.retain(|n, _| frontends.get(n).is_some());
        last.retain(|n, _| frontends.get(n).is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_or_removed_file_is_a_change() {
        let dir = std::env::temp_dir().join(format!("shellac-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cert.pem");
        std::fs::write(&f, "one").unwrap();
        let s = Stamps::take(std::slice::from_ref(&f));
        assert!(!s.changed());
        std::fs::write(&f, "three").unwrap();
        assert!(s.changed());
        let s = Stamps::take(std::slice::from_ref(&f));
        std::fs::remove_file(&f).unwrap();
        assert!(s.changed());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
