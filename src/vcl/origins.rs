//! What a VCL file's `backend`, `probe` and `director` declarations and its `vcl_init`
//! director objects become: Shellac's own backends, probes and directors (`src/backend/`),
//! so health checks, pools, counters and `shellac stat` work the same for VCL and TOML.

use crate::config::{BackendConfig, Config, DirectorConfig, ProbeConfig};

/// The origins a VCL program declares.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    pub backends: Vec<BackendConfig>,
    /// Probes declared on their own (`probe NAME { ... }`) and used by a backend.
    pub probes: Vec<ProbeConfig>,
    pub directors: Vec<DirectorConfig>,
    /// The backend or director requests go to when VCL does not choose one.
    pub default: Option<String>,
}

impl Origins {
    /// `config` with its origins replaced by these (a VCL program declares its own).
    pub fn apply_to(&self, config: &mut Config) {
        config.backends = self.backends.clone();
        config.probes = self.probes.clone();
        config.directors = self.directors.clone();
        config.routing.default = self.default.clone();
    }

    /// Every name a request can be routed to, backends first.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.backends
            .iter()
            .map(|b| b.name.as_str())
            .chain(self.directors.iter().map(|d| d.name.as_str()))
    }
}
