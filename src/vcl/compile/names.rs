//! Names of variables resolved through the table (`vars/`) for the subroutines the code
//! runs in: which row applies, whether it may be read, set or unset there, header field names.

use http::HeaderName;

use super::super::ast::Pos;
use super::super::ir::Var;
use super::super::types::{Method, Type};
use super::super::vars::{self, Slot, VarDef};
use super::Checker;

/// How a variable is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    Unset,
}

/// A name that is a variable but cannot be used here (reported).
struct Refused;

/// A variable that was reported: `slot`, of type `Error` (accepted everywhere after).
fn wrong(slot: Slot) -> Option<(Var, Type)> {
    Some((Var { slot, header: None }, Type::Error))
}

impl Checker<'_> {
    /// Resolves a variable for `access` in every subroutine the current code runs in.
    /// `None` when it is not one (or not usable here: reported).
    pub(crate) fn variable(&mut self, name: &str, pos: Pos, access: Access) -> Option<(Var, Type)> {
        let found = self.find_variable(name, pos, access);
        if found
            .as_ref()
            .is_some_and(|(v, _)| v.slot == Slot::ReqDigest)
        {
            self.reads_digest = true;
        }
        if found.as_ref().is_some_and(|(v, _)| {
            matches!(
                v.slot,
                Slot::ServerIp | Slot::ServerPort | Slot::LocalIp | Slot::RemoteIp
            )
        }) {
            self.reads_local = true;
        }
        found
    }

    fn find_variable(&mut self, name: &str, pos: Pos, access: Access) -> Option<(Var, Type)> {
        let mut rows: Vec<&'static VarDef> = vars::rows(name, self.dialect).collect();
        if rows.is_empty() {
            return None;
        }
        // An exact row (a protected header such as `req.http.content-length`) is the
        // variable; the family row does not apply to it.
        if rows.iter().any(|r| !r.name.ends_with('.')) {
            rows.retain(|r| !r.name.ends_with('.'));
        }
        let rows = rows;
        let chosen = match self.choose_row(name, pos, access, &rows) {
            Ok(chosen) => chosen?,
            Err(Refused) => return wrong(Slot::Unsupported("")),
        };
        if let Slot::Unsupported(why) = chosen.slot {
            self.unsupported(pos, format!("'{name}': {why}"));
            return wrong(chosen.slot);
        }
        // `storage.NAME`, and its figures `storage.NAME.free_space`, `.used_space`, `.happy`.
        let mut chosen_ty = chosen.ty;
        let mut slot = chosen.slot;
        if chosen.slot == Slot::Storage {
            let field = vars::field_of(chosen, name).unwrap_or("");
            let (store, figure) = match field.split_once('.') {
                Some((store, figure)) => (store, Some(figure)),
                None => (field, None),
            };
            if !self.storage_known(store, pos) {
                return wrong(Slot::Unsupported(""));
            }
            match figure {
                None => {}
                Some("free_space" | "used_space") => {
                    (slot, chosen_ty) = (Slot::StorageFigure, Type::Bytes);
                }
                Some("happy") => (slot, chosen_ty) = (Slot::StorageFigure, Type::Bool),
                Some(other) => {
                    self.error(
                        pos,
                        format!("Symbol not found: '{name}' (a storage has free_space, used_space and happy, not '{other}')"),
                    );
                    return wrong(Slot::Unsupported(""));
                }
            }
        }
        // A storage's name (and figure) is kept as the variable's field, dots and all; it is
        // no header.
        let header = if chosen.slot == Slot::Storage {
            vars::field_of(chosen, name)
                .and_then(|f| HeaderName::from_bytes(f.to_ascii_lowercase().as_bytes()).ok())
        } else {
            let Ok(header) = self.var_header(chosen, name, pos) else {
                return wrong(chosen.slot);
            };
            header
        };
        if self.here == 0 {
            // An unreached subroutine: what could run it at all.
            self.possible &= rows.iter().fold(0, |m, r| m | r.read | r.write | r.unset);
        }
        Some((Var { slot, header }, chosen_ty))
    }

    /// Whether `storage.NAME` names a storage: `s0`, `Transient` or one of the configuration's
    /// `[[storage.named]]` (any name when checked without a configuration); reports it if not.
    fn storage_known(&mut self, store: &str, pos: Pos) -> bool {
        let Some(declared) = &self.options.storages else {
            return true;
        };
        let known = |n: &str| n.eq_ignore_ascii_case(store);
        if known("s0") || known("Transient") || declared.iter().any(|d| known(d)) {
            return true;
        }
        let mut names = vec!["s0".to_string(), "Transient".to_string()];
        names.extend(declared.iter().cloned());
        self.error(
            pos,
            format!(
                "Symbol not found: 'storage.{store}': no such storage (the configuration's storages: {}; declare it with [[storage.named]] name = \"{store}\")",
                names.join(", ")
            ),
        );
        false
    }

    /// The row of `rows` that applies for `access` in every subroutine the code runs in
    /// (`None`: it runs in none); `Err` when there is none (reported).
    fn choose_row(
        &mut self,
        name: &str,
        pos: Pos,
        access: Access,
        rows: &[&'static VarDef],
    ) -> Result<Option<&'static VarDef>, Refused> {
        let perm = |r: &VarDef| match access {
            Access::Read => r.read,
            Access::Write => r.write,
            Access::Unset => r.unset,
        };
        if self.here == 0 {
            return match rows.iter().find(|r| perm(r) != 0) {
                Some(r) => Ok(Some(r)),
                None => {
                    self.not_allowed(name, pos, access, None);
                    Err(Refused)
                }
            };
        }
        let mut chosen: Option<&'static VarDef> = None;
        for m in Method::ALL {
            if self.here & m.bit() == 0 {
                continue;
            }
            match rows.iter().find(|r| perm(r) & m.bit() != 0) {
                None => {
                    self.not_allowed(name, pos, access, Some((m, rows)));
                    return Err(Refused);
                }
                Some(r) => match chosen {
                    Some(c) if c.slot != r.slot => {
                        let names = Self::method_names(self.here).join(", ");
                        self.error(
                            pos,
                            format!(
                                "'{name}' means different things in the subroutines that \
                                 call {} ({names}); use it in one of them",
                                self.here_name
                            ),
                        );
                        return Err(Refused);
                    }
                    _ => chosen = Some(r),
                },
            }
        }
        Ok(chosen)
    }

    /// The header a family row's variable names (`req.http.x-a`), or a protected header's
    /// exact row; `Err` when the name is not a header field name (reported).
    fn var_header(
        &mut self,
        chosen: &'static VarDef,
        name: &str,
        pos: Pos,
    ) -> Result<Option<HeaderName>, Refused> {
        match vars::field_of(chosen, name) {
            Some(field) => match self.header_field(field, pos) {
                // Varnish keeps a header's name and its colon behind a signed length byte.
                Some(field) if field.len() > 126 => {
                    let start: String = field.chars().take(20).collect();
                    self.error(pos, format!("HTTP header ({start}..) is too long."));
                    Err(Refused)
                }
                Some(field) => match HeaderName::from_bytes(field.as_bytes()) {
                    Ok(h) => {
                        if field.bytes().any(|b| b.is_ascii_uppercase()) {
                            self.spelled
                                .entry(h.clone())
                                .or_insert_with(|| field.into());
                        }
                        Ok(Some(h))
                    }
                    Err(_) => {
                        self.error(pos, format!("'{field}' is not a valid header field name"));
                        Err(Refused)
                    }
                },
                None => Err(Refused),
            },
            None if chosen.name.ends_with('.') => Ok(None),
            // Protected headers have exact rows (`req.http.content-length`).
            None => Ok(chosen
                .name
                .split_once(".http.")
                .and_then(|(_, f)| HeaderName::from_bytes(f.as_bytes()).ok())),
        }
    }

    /// Reports why `name` cannot be used for `access` (here, or in `m`).
    fn not_allowed(
        &mut self,
        name: &str,
        pos: Pos,
        access: Access,
        missing: Option<(Method, &[&'static VarDef])>,
    ) {
        let mut rows: Vec<&VarDef> = vars::rows(name, self.dialect).collect();
        if rows.iter().any(|r| !r.name.ends_with('.')) {
            rows.retain(|r| !r.name.ends_with('.'));
        }
        let anywhere = rows.iter().any(|r| match access {
            Access::Read => r.read != 0,
            Access::Write => r.write != 0,
            Access::Unset => r.unset != 0,
        });
        let called = if self.here_name.starts_with("vcl_") {
            String::new()
        } else {
            format!(" (sub {} is called from it)", self.here_name)
        };
        let msg = match (access, anywhere, missing) {
            (Access::Write, false, _) => format!("'{name}': Variable is read only."),
            (Access::Unset, false, _) => format!("'{name}': Variable cannot be unset"),
            (Access::Read, false, _) => format!("'{name}': Variable cannot be read"),
            (_, true, Some((m, _))) => format!(
                "'{name}': Not available in subroutine '{}'.{called}",
                m.sub_name()
            ),
            (_, true, None) => format!("'{name}' cannot be used here"),
        };
        self.error(pos, msg);
    }

    /// The field name of a header variable (`X-Foo`, or `"x.y"` quoted in VCL 4.1), checked.
    fn header_field<'n>(&mut self, field: &'n str, pos: Pos) -> Option<&'n str> {
        let name = match field.strip_prefix('"').and_then(|f| f.strip_suffix('"')) {
            Some(quoted) => {
                if self.dialect < super::super::types::Dialect::V41 {
                    self.error(pos, "Quoted headers are available for VCL >= 4.1");
                    return None;
                }
                quoted
            }
            None => {
                if field.contains('.') {
                    self.error(
                        pos,
                        format!(
                            "the header name '{field}' may not hold '.' (quote it in VCL 4.1: \
                             \"{field}\")"
                        ),
                    );
                    return None;
                }
                field
            }
        };
        if name.len() > 127 {
            let short: String = name.chars().take(20).collect();
            self.error(pos, format!("HTTP header ({short}..) is too long."));
            return None;
        }
        Some(name)
    }
}
