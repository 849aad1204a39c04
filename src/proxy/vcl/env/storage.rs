//! What a subroutine reads of the storages (`cache/stores.rs`): `storage.NAME`, its figures
//! (`.free_space`, `.used_space`, `.happy`), `beresp.storage` / `beresp.storage_hint` and
//! `obj.storage` — each named as Varnish prints a STEVEDORE, `storage.NAME`.

use super::Scope;
use crate::cache::stores::{S0, TRANSIENT};
use crate::vcl::ir::Var;
use crate::vcl::run::Value;
use crate::vcl::vars::Slot;

impl Scope<'_> {
    /// `storage.NAME` of storage `id` as declared.
    fn stevedore(&self, id: u8) -> Value<'static> {
        let name = match self.cache.storage.site_shares() {
            Some(shares) => shares.names.name(id),
            None if id == TRANSIENT => "Transient".to_string(),
            None => "s0".to_string(),
        };
        Value::Str(format!("storage.{name}").into())
    }

    /// The id of the storage `name` names (`storage.` before it or not; letter case
    /// ignored); `None` for a name no configuration declared.
    pub(super) fn store_id(&self, name: &str) -> Option<u8> {
        let name = name.strip_prefix("storage.").unwrap_or(name);
        match self.cache.storage.site_shares() {
            Some(shares) => shares.names.id(name),
            None if name.eq_ignore_ascii_case("transient") => Some(TRANSIENT),
            None if name.eq_ignore_ascii_case("s0") => Some(S0),
            None => None,
        }
    }

    pub(super) fn get_storage(&self, var: &Var) -> Value<'_> {
        match var.slot {
            // A miss delivers the object it stored; what is not stored (a pass, an
            // uncacheable response) is Varnish's Transient object.
            Slot::ObjStorage => match (self.obj, self.fetched) {
                (Some((o, _)), _) if o.state.store() == S0 && o.state.transient() => {
                    self.stevedore(TRANSIENT)
                }
                (Some((o, _)), _) => self.stevedore(o.state.store()),
                (None, Some(f)) => self.stevedore(f.store),
                (None, None) => self.stevedore(TRANSIENT),
            },
            // Varnish's default: `Transient` for what is not cached (a pass), else `s0`.
            Slot::BerespStorage => match self.beresp.as_ref() {
                Some(b) => match b.storage.as_deref() {
                    Some(name) => match self.store_id(name) {
                        Some(id) => self.stevedore(id),
                        None => Value::Str(format!("storage.{name}").into()),
                    },
                    None if b.uncacheable => self.stevedore(TRANSIENT),
                    None => self.stevedore(S0),
                },
                None => Value::None,
            },
            Slot::Storage => {
                let name = var.header.as_ref().map_or("", |h| h.as_str());
                match self.store_id(name) {
                    Some(id) => self.stevedore(id),
                    None => Value::Str(format!("storage.{name}").into()),
                }
            }
            Slot::StorageFigure => self.storage_figure(var),
            _ => Value::None,
        }
    }

    /// `storage.NAME.free_space`, `.used_space`, `.happy`. `s0` is the memory tier as a whole;
    /// a storage without a size of its own has the memory tier's free space.
    fn storage_figure(&self, var: &Var) -> Value<'static> {
        let field = var.header.as_ref().map_or("", |h| h.as_str());
        let (name, figure) = field.rsplit_once('.').unwrap_or((field, ""));
        if figure == "happy" {
            return Value::Bool(true);
        }
        let tier = self.cache.storage.stats();
        // The objects stored and the fills under way (`cache/shares.rs`).
        let shares = self.cache.storage.site_shares();
        let tier_used = tier.bytes + shares.map_or(0, |s| s.filling_total());
        let tier_free = tier.capacity.saturating_sub(tier_used);
        let (used, free) = match (self.store_id(name), shares) {
            (Some(id), Some(shares)) if id != S0 => match shares.store(id) {
                Some(f) => (
                    f.bytes,
                    f.size
                        .map_or(tier_free, |s| s.saturating_sub(f.bytes).min(tier_free)),
                ),
                None => (0, tier_free),
            },
            _ => (tier_used, tier_free),
        };
        Value::Bytes(if figure == "used_space" { used } else { free })
    }
}
