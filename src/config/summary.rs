//! The one-paragraph summary of a configuration (`shellac check`, the start-up log).

use super::{BackendProtocol, Config, units};

impl Config {
    /// One-paragraph summary of what the configuration asks for (`shellac check`).
    /// `policy`: what the policy layer says the VCL program is (`vcl::attach::describe`).
    pub fn summary(&self, policy: Option<&str>) -> String {
        self.summary_running(true, policy)
    }

    /// One-paragraph summary of what runs (the start-up log): as [`Config::summary`], except
    /// that a configured disk tier that is not running (it could not be opened and
    /// `on_open_error = "memory-only"`) is said to be off.
    pub fn summary_running(&self, disk_running: bool, policy: Option<&str>) -> String {
        let listen: Vec<String> = self.server.listen.iter().map(|a| a.to_string()).collect();
        let backends: Vec<String> = self
            .backends
            .iter()
            .map(|b| match (&b.address, &b.root, b.protocol) {
                (_, Some(root), BackendProtocol::Files) => {
                    format!("{} → files:{}", b.name, root.display())
                }
                (Some(address), _, _) => format!("{} → {address}", b.name),
                _ => format!("{} → {}:{}", b.name, b.host, b.port),
            })
            .collect();
        let disk = match &self.storage.disk {
            Some(d) if !disk_running => format!(
                "; disk cache at {} NOT running (it could not be opened, see the error above; \
                 on_open_error = \"memory-only\")",
                d.path.display()
            ),
            Some(d) => format!(
                "; disk cache {} at {} (admission {})",
                units::format_size(d.size.0),
                d.path.display(),
                d.admission.as_str()
            ),
            None => String::new(),
        };
        let disk = match &self.storage.shared {
            Some(s) => format!(
                "{disk}; shared tier on the Redis Cluster at {} (prefix {})",
                s.nodes.join(", "),
                s.key_prefix
            ),
            None => disk,
        };
        let directors: Vec<String> = self.directors.iter().map(|d| d.describe()).collect();
        let mut out = format!("listen {}", listen.join(", "));
        for t in &self.tls {
            let addrs: Vec<String> = t.listen.iter().map(|a| a.to_string()).collect();
            out.push_str(&format!(
                "; TLS {} on {} ({} certificate{})",
                t.name,
                addrs.join(", "),
                t.certificates.len(),
                if t.certificates.len() == 1 { "" } else { "s" }
            ));
        }
        out.push_str(&format!(
            "; {} backend{} ({})",
            self.backends.len(),
            if self.backends.len() == 1 { "" } else { "s" },
            backends.join(", "),
        ));
        if let Some(policy) = policy {
            out.push_str(&format!("; policy: {policy}"));
        }
        if !directors.is_empty() {
            out.push_str(&format!("; directors {}", directors.join(", ")));
        }
        out.push_str(&format!(
            "; requests go to {}; memory cache {}{disk}; admin {}",
            self.default_target().unwrap_or("-"),
            units::format_size(self.cache.memory_size.0),
            self.server
                .admin
                .map(|a| a.to_string())
                .unwrap_or_else(|| "off".into()),
        ));
        out
    }
}
