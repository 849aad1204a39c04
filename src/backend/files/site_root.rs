//! `[[site]] root` for a files backend: a request that carries its site's document root
//! ([`DocRoot`]) is served from that root, by a [`Files`] of its own (its own open-file cache,
//! of the backend's size) made on the first such request and kept while the backend lives.
//! Roots come from the configuration, so there are few; at most [`MAX_ROOTS`] are kept (a
//! reload that changes roots many times starts over rather than growing).

use std::sync::{Arc, Mutex};

use super::Files;
use crate::backend::DocRoot;
use crate::config::BackendConfig;

/// Site roots kept per backend, at most.
const MAX_ROOTS: usize = 256;

/// The backend's settings, and the [`Files`] of each site root seen.
pub(super) struct SiteRoots {
    config: Box<BackendConfig>,
    roots: Mutex<Vec<(DocRoot, Arc<Files>)>>,
}

impl SiteRoots {
    pub fn new(config: &BackendConfig) -> SiteRoots {
        SiteRoots {
            config: Box::new(config.clone()),
            roots: Mutex::new(Vec::new()),
        }
    }

    /// The files of `root`, with the backend's other settings.
    pub fn files(&self, root: &DocRoot) -> Arc<Files> {
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
        let files = Arc::new(Files::new(&config));
        roots.push((root.clone(), files.clone()));
        files
    }

    /// Every site root's files (for the open-file cache's counters).
    pub fn all(&self) -> Vec<Arc<Files>> {
        self.roots
            .lock()
            .map(|r| r.iter().map(|(_, f)| f.clone()).collect())
            .unwrap_or_default()
    }
}
