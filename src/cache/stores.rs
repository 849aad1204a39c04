//! Named storages (`[[storage.named]]`, Varnish's `-s NAME=malloc,SIZE`): bounded parts of the
//! memory tier that VCL (`beresp.storage = storage.NAME`) and rules (`storage = "NAME"`) put
//! objects in, each with its own account of bytes, objects and evictions.
//!
//! A storage is a small number (its *id*) that its objects carry (`Object::store`, and the
//! memory tier's entry head through its account): `0` is `s0`, the memory tier itself, whose
//! objects are charged to their site's account as before; `1` is `Transient`, where
//! transient objects go (memory only: VCL's `storage.Transient`, `cache.shortlived`); the
//! configuration's other storages get the ids after it, in the order their names are first
//! seen since start, so that a reload keeps every name's id and the objects it holds stay
//! charged to it. An object in a storage other than `s0` is charged to that storage's account
//! (`shares.rs`), not to its site's: the storage is its bound, as a stevedore is Varnish's.

use parking_lot::RwLock;

/// `[[storage.named]]` one configuration may declare besides `Transient` (`shellac check`
/// refuses more).
pub const MAX_NAMED: usize = crate::config::MAX_NAMED_STORAGES;

/// Storage ids a process can tell apart since it started: `s0`, `Transient` and up to
/// [`MAX_NAMED`] names of the configuration; an object keeps its id in 4 bits
/// (`TierState`).
pub const MAX_STORES: usize = MAX_NAMED + 2;
const _: () = assert!(MAX_STORES <= 16);

/// The id of `s0`, the memory tier itself (charged to the object's site).
pub const S0: u8 = 0;

/// The id of `Transient`.
pub const TRANSIENT: u8 = 1;

/// The names of the storages seen since start, by id.
pub struct StoreNames(RwLock<Vec<Box<str>>>);

impl Default for StoreNames {
    fn default() -> StoreNames {
        StoreNames(RwLock::new(vec!["s0".into(), "Transient".into()]))
    }
}

impl StoreNames {
    /// The id of the storage named `name` (letter case ignored: VCL keeps names lower-cased),
    /// if it was ever declared (`s0` and `Transient` always are).
    pub fn id(&self, name: &str) -> Option<u8> {
        let names = self.0.read();
        names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .and_then(|i| u8::try_from(i).ok())
    }

    /// The name of storage `id` as it was declared (`s0` for an id never given).
    pub fn name(&self, id: u8) -> String {
        self.0
            .read()
            .get(usize::from(id))
            .map_or_else(|| "s0".to_string(), |n| n.to_string())
    }

    /// How many ids are given (`s0` and `Transient` included).
    pub fn len(&self) -> usize {
        self.0.read().len()
    }

    /// Never empty: `s0` and `Transient` always have their ids.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The id of `name`, given one now if it has none and an id is left (`None`: every id is
    /// taken by names seen before; its objects then go to `s0`).
    pub fn register(&self, name: &str) -> Option<u8> {
        if let Some(id) = self.id(name) {
            return Some(id);
        }
        let mut names = self.0.write();
        if names.len() >= MAX_STORES {
            return None;
        }
        names.push(name.into());
        u8::try_from(names.len() - 1).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_ids_and_ids_run_out() {
        let names = StoreNames::default();
        assert_eq!(names.id("S0"), Some(S0));
        assert_eq!(names.id("transient"), Some(TRANSIENT));
        assert_eq!(names.id("images"), None);
        assert_eq!(names.register("images"), Some(2));
        assert_eq!(names.register("Images"), Some(2), "letter case ignored");
        assert_eq!(names.register("Transient"), Some(TRANSIENT));
        assert_eq!(names.name(2), "images");
        assert_eq!(names.name(200), "s0");
        for i in 0..MAX_NAMED {
            names.register(&format!("n{i}"));
        }
        assert_eq!(names.register("late"), None);
        assert_eq!(names.id("n0"), Some(3));
    }
}
