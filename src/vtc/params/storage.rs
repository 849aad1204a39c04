//! varnishd's `-s [NAME=]TYPE[,ARGS]` as Shellac's storages: `s0` (the first storage without
//! a name, or one named `s0`) is the memory tier (`cache.memory_size`); every other one is a
//! `[[storage.named]]` with its size, and the memory tier grows by it, since Varnish gives
//! each storage memory of its own. A `file` storage is a named storage in memory like the
//! others (its path is not used: Shellac's disk tier is one file below all of them). Other
//! types (`debug`, `umem`, `persistent`) have no equivalent.

use crate::config::units;

use super::{ParamError, Settings, memory_floor};

impl Settings {
    /// `-s [NAME=]TYPE[,SIZE]` (`file,PATH[,SIZE]`).
    pub fn storage(&mut self, spec: &str) -> Result<(), ParamError> {
        let spec = spec.trim();
        let (name, rest) = match spec.split_once('=') {
            Some((name, rest)) => (Some(name.trim()), rest),
            None => (None, spec),
        };
        let mut parts = rest.split(',');
        let kind = parts.next().unwrap_or("").trim();
        let size = match kind {
            "malloc" | "default" => parts.next(),
            "file" => {
                let _path = parts.next();
                parts.next()
            }
            _ => {
                return Err(ParamError::Unmapped(format!(
                    "storage type {kind:?} has no Shellac equivalent"
                )));
            }
        };
        if let Some(extra) = parts.next() {
            return Err(ParamError::Unmapped(format!(
                "-s {spec}: storage argument {extra:?} (granularity, advice) has no Shellac equivalent"
            )));
        }
        let bytes = match size.map(str::trim).filter(|s| !s.is_empty()) {
            None => None,
            Some(size) => Some(
                units::parse_size(size)
                    .map_err(|e| ParamError::Invalid(format!("-s {spec}: {e}")))?,
            ),
        };
        // Varnish names the storages without a name s0, s1, ... in the order given.
        let name = match name {
            Some(n) => n.to_string(),
            None => {
                self.unnamed += 1;
                format!("s{}", self.unnamed - 1)
            }
        };
        if name == "s0" {
            if let Some(bytes) = bytes {
                self.memory_tier(bytes);
            }
            return Ok(());
        }
        if self.named.iter().any(|(n, _)| *n == name) {
            return Err(ParamError::Invalid(format!(
                "-s {spec}: a storage named {name} is declared before"
            )));
        }
        self.named.push((name, bytes));
        Ok(())
    }

    /// `s0`'s size: the memory tier's, at least Shellac's floor.
    fn memory_tier(&mut self, bytes: u64) {
        // Below Shellac's smallest memory tier (`cache.memory_size`'s minimum, 64 KiB) the
        // test runs on that minimum: what such a test stores fits either way, and one that
        // counts evictions (`n_lru_nuked`) still sees the difference.
        let bytes = bytes.max(memory_floor());
        self.values
            .insert(("cache", "memory_size"), bytes.to_string());
        // Varnish's storage bounds the largest object it can hold; Shellac's
        // `max_object_size` (64 MiB) may not exceed the memory tier.
        if bytes < 64 << 20 {
            self.values
                .insert(("cache", "max_object_size"), bytes.to_string());
        }
    }

    /// `cache.memory_size` with the named storages' sizes added (`None`: no storage has a
    /// size, the value set or the default stands).
    pub(super) fn memory_with_named(&self) -> Option<u64> {
        let named: u64 = self.named.iter().filter_map(|(_, b)| *b).sum();
        if named == 0 {
            return None;
        }
        let s0 = self
            .values
            .get(&("cache", "memory_size"))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(256 << 20);
        Some(s0 + named)
    }

    /// The `[[storage.named]]` tables.
    pub(super) fn named_toml(&self) -> String {
        let mut out = String::new();
        for (name, bytes) in &self.named {
            out.push_str(&format!(
                "\n[[storage.named]]\nname = {}\n",
                super::quote(name)
            ));
            if let Some(b) = bytes {
                out.push_str(&format!("size = {}\n", (*b).max(1)));
            }
        }
        out
    }
}
