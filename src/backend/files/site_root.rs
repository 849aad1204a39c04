//! `[[site]] root` for a files backend: a request that carries its site's document root
//! ([`DocRoot`]) is served from that root, by a files origin of its own (`T`, made from the
//! backend's settings with that root: its own open-file cache, of the backend's size) on the
//! first such request and kept while the backend lives.
//! Roots come from the configuration, so there are few; at most [`MAX_ROOTS`] are kept (a
//! reload that changes roots many times starts over rather than growing).

use std::sync::{Arc, Mutex};

use crate::backend::extensions::DocRoot;
use crate::config::BackendConfig;

/// Site roots kept per backend, at most.
const MAX_ROOTS: usize = 256;

/// The backend's settings, and the files origin of each site root seen.
pub(super) struct SiteRoots<T> {
    config: Box<BackendConfig>,
    roots: Mutex<Vec<(DocRoot, Arc<T>)>>,
}

impl<T> SiteRoots<T> {
    pub fn new(config: &BackendConfig) -> SiteRoots<T> {
        SiteRoots {
            config: Box::new(config.clone()),
            roots: Mutex::new(Vec::new()),
        }
    }

    /// The files origin of `root`: `make` of the backend's settings with that root.
    pub fn files(&self, root: &DocRoot, make: impl FnOnce(&BackendConfig) -> T) -> Arc<T> {
        let mut roots = match self.roots.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((_, f)) = roots.iter().find(|(r, _)| r == root) {
            return f.clone();
        }
        if roots.len() >= MAX_ROOTS {
            roots.clear();
        }
        let mut config = (*self.config).clone();
        config.root = Some(root.real.to_path_buf());
        let files = Arc::new(make(&config));
        roots.push((root.clone(), files.clone()));
        files
    }

    /// Every site root's files (for the open-file cache's counters).
    pub fn all(&self) -> Vec<Arc<T>> {
        self.roots
            .lock()
            .map(|r| r.iter().map(|(_, f)| f.clone()).collect())
            .unwrap_or_default()
    }
}
