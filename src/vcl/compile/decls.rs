//! Declarations: `import`, the fields of `backend` / `probe` / 2.x `director` blocks (each
//! known, none twice, of its type), and the names of backends and directors (targets).
//! `backend.rs` and `probe.rs` turn the fields into Shellac's settings.

use std::time::Duration;

use super::super::ast::{Field, FieldValue, Pos};
use super::consts::{Const, const_of};
use super::vmods::Vmod;
use super::{Checker, Import, Target};
use crate::vcl::types::Dialect;

impl Checker<'_> {
    pub(super) fn import(&mut self, name: &str, alias: Option<&str>, from: Option<&str>, pos: Pos) {
        let local = alias.unwrap_or(name).to_string();
        if self.imports.contains_key(&local) {
            // Importing the same VMOD twice is allowed (an included file may import it too).
            return;
        }
        let vmod = Vmod::by_name(name);
        if let Vmod::Other(_) = vmod {
            self.unsupported(
                pos,
                format!(
                    "Shellac has no VMOD '{name}'{}: it implements std, directors, cookie, purge, \
                     blob and xkey (docs/vcl.md lists what each offers)",
                    from.map(|f| format!(" (from {f})")).unwrap_or_default()
                ),
            );
        } else if from.is_some() {
            self.unsupported(
                pos,
                format!(
                    "import {name} from \"...\": Shellac's {name} is built in, it loads no \
                     shared object"
                ),
            );
        }
        if self.redefined(&local, pos) {
            return;
        }
        self.imports.insert(local, Import { vmod, pos });
    }

    /// Fields of a declaration: each known, none twice; calls `f` with each.
    pub(super) fn fields<'f>(
        &mut self,
        what: &str,
        fields: &'f [Field],
        known: &[&str],
    ) -> Vec<&'f Field> {
        let mut seen: Vec<&'f Field> = Vec::new();
        for f in fields {
            if !known.contains(&f.name.as_str()) {
                self.error(
                    f.pos,
                    format!(
                        "Unknown field: '.{}' in {what} (known: .{})",
                        f.name,
                        known.join(", .")
                    ),
                );
                continue;
            }
            if let Some(first) = seen.iter().find(|s| s.name == f.name) {
                let at = self.at(first.pos);
                self.error(
                    f.pos,
                    format!("Field '.{}' redefined (first at {at})", f.name),
                );
                continue;
            }
            seen.push(f);
        }
        seen
    }

    pub(super) fn field_str(&mut self, f: &Field) -> Option<String> {
        match &f.value {
            FieldValue::Expr(e) => match const_of(e) {
                Some(Const::Str(s)) => Some(s),
                Some(Const::Lines(l)) => Some(l.concat()),
                _ => {
                    self.error(f.pos, format!("'.{}' must be a string in quotes", f.name));
                    None
                }
            },
            _ => {
                self.error(f.pos, format!("'.{}' must be a string in quotes", f.name));
                None
            }
        }
    }

    pub(super) fn field_duration(&mut self, f: &Field) -> Option<Duration> {
        match &f.value {
            FieldValue::Expr(e) => match const_of(e) {
                Some(Const::Duration(s)) if s >= 0.0 && s.is_finite() => {
                    Some(Duration::from_secs_f64(s))
                }
                Some(Const::Duration(_)) => {
                    self.error(f.pos, format!("'.{}' may not be negative", f.name));
                    None
                }
                _ => {
                    self.error(
                        f.pos,
                        format!("'.{}' must be a duration such as 5s or 500ms", f.name),
                    );
                    None
                }
            },
            _ => {
                self.error(f.pos, format!("'.{}' must be a duration", f.name));
                None
            }
        }
    }

    pub(super) fn field_uint(&mut self, f: &Field) -> Option<u64> {
        match &f.value {
            FieldValue::Expr(e) => match const_of(e) {
                Some(Const::Int(n)) if n >= 0 => Some(n as u64),
                _ => {
                    self.error(f.pos, format!("'.{}' must be a whole number", f.name));
                    None
                }
            },
            _ => {
                self.error(f.pos, format!("'.{}' must be a whole number", f.name));
                None
            }
        }
    }

    pub(super) fn add_target(&mut self, name: &str, pos: Pos, none: bool) -> Option<u16> {
        if self.redefined(name, pos) {
            return None;
        }
        if self.dialect.is_legacy() && name.contains('-') {
            self.error(
                pos,
                format!("the name '{name}' may not hold '-' in VCL 2.x (letters, digits, '_')"),
            );
        }
        self.targets.push(Target {
            name: name.to_string(),
            pos,
            used: false,
            none,
        });
        Some((self.targets.len() - 1) as u16)
    }

    /// A backend declaration (its name was registered by `add_target` already).
    pub(super) fn backend(&mut self, name: &str, fields: Option<&[Field]>, pos: Pos) {
        let Some(fields) = fields else {
            // `backend NAME none;` came with VCL 4.1.
            if self.dialect == Dialect::V40 {
                self.error(
                    pos,
                    format!(
                        "'backend {name} none;' needs 'vcl 4.1;': Compiled VCL version (4.0) not supported."
                    ),
                );
            }
            return;
        };
        if let Some(b) = self.backend_config(name, fields, pos) {
            self.origins.backends.push(b);
        }
    }
}
