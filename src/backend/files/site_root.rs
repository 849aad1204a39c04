//! `[[site]] root` and `[[site]] autoindex` for a files backend: a request that carries its
//! site's document root ([`DocRoot`]) or listings ([`Autoindex`]) is served from that root
//! with those listings, by a files origin of its own (`T`, made from the backend's settings
//! with that root and `autoindex`: its own open-file cache, of the backend's size) on the
//! first such request and kept while the backend lives.
//! Roots come from the configuration, so there are few; at most [`MAX_ROOTS`] are kept (a
//! reload that changes roots many times starts over rather than growing).

use std::sync::{Arc, Mutex};

use crate::backend::extensions::{Autoindex, DocRoot};
use crate::config::BackendConfig;

/// Site roots kept per backend, at most.
const MAX_ROOTS: usize = 256;

/// The backend's settings, and the files origin of each site root seen.
pub(super) struct SiteRoots<T> {
    config: Box<BackendConfig>,
    roots: Mutex<Vec<(Variant, Arc<T>)>>,
}

/// What a files origin is kept for: a root, listing directories or not.
type Variant = (DocRoot, Autoindex);

impl<T> SiteRoots<T> {
    pub fn new(config: &BackendConfig) -> SiteRoots<T> {
        SiteRoots {
            config: Box::new(config.clone()),
            roots: Mutex::new(Vec::new()),
        }
    }

    /// The files origin of `root` listing directories or not (`autoindex`): `make` of the
    /// backend's settings with that root and `autoindex`.
    pub fn files(
        &self,
        root: &DocRoot,
        autoindex: Autoindex,
        make: impl FnOnce(&BackendConfig) -> T,
    ) -> Arc<T> {
        let mut roots = match self.roots.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((_, f)) = roots
            .iter()
            .find(|((r, a), _)| r == root && *a == autoindex)
        {
            return f.clone();
        }
        if roots.len() >= MAX_ROOTS {
            roots.clear();
        }
        let mut config = (*self.config).clone();
        config.root = Some(root.real.to_path_buf());
        config.autoindex = autoindex.0;
        let files = Arc::new(make(&config));
        roots.push(((root.clone(), autoindex), files.clone()));
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
