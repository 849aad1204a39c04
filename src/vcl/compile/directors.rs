//! 2.x `director NAME KIND { ... }` blocks, turned into Shellac directors, and the weights
//! of their members (kept on the backends).

use super::super::ast::{Expr, Field, FieldValue, Pos};
use super::Checker;
use crate::config::{DirectorConfig, DirectorKind};

impl Checker<'_> {
    /// 2.x `director NAME KIND { ... }`.
    pub(super) fn director(
        &mut self,
        name: &str,
        kind: &str,
        fields: &[Field],
        members: &[Vec<Field>],
        pos: Pos,
    ) {
        let (dkind, weighted) = match kind {
            "random" => (DirectorKind::Random, true),
            "client" | "hash" => (DirectorKind::Hash, true),
            "round-robin" => (DirectorKind::RoundRobin, false),
            "fallback" => (DirectorKind::Fallback, false),
            "dns" => {
                self.unsupported(
                    pos,
                    "the dns director is not supported by Shellac: declare the backends and use \
                     a random or round-robin director",
                );
                return;
            }
            other => {
                self.error(
                    pos,
                    format!(
                        "Unknown director policy '{other}' (random, client, hash, round-robin, \
                         fallback)"
                    ),
                );
                return;
            }
        };
        let known: &[&str] = if weighted { &["retries"] } else { &[] };
        for f in self.fields("a director", fields, known) {
            self.field_uint(f);
        }
        let mut names = Vec::new();
        for (i, member) in members.iter().enumerate() {
            let mpos = member.first().map_or(pos, |f| f.pos);
            let known: &[&str] = if weighted {
                &["backend", "weight"]
            } else {
                &["backend"]
            };
            let fs = self.fields("a director member", member, known);
            let mut backend = None;
            let mut weight = None;
            for f in fs {
                match (f.name.as_str(), &f.value) {
                    ("backend", FieldValue::Expr(Expr::Name(n, p))) => {
                        match self.targets.iter_mut().find(|t| t.name == *n) {
                            Some(t) => {
                                t.used = true;
                                backend = Some(n.clone());
                            }
                            None => self
                                .error(*p, format!("Undefined backend {n}, first reference here")),
                        }
                    }
                    ("backend", FieldValue::Table(t)) => {
                        let inline = format!("{name}_{}", i + 1);
                        if let Some(b) = self.backend_config(&inline, t, f.pos) {
                            self.origins.backends.push(b);
                            backend = Some(inline);
                        }
                    }
                    ("backend", _) => self.error(
                        f.pos,
                        "'.backend' must name a backend or be a { ... } backend",
                    ),
                    ("weight", _) => match self.field_uint(f) {
                        Some(0) => self.error(f.pos, "'.weight' must be at least 1"),
                        Some(w) => weight = Some(w),
                        None => {}
                    },
                    _ => {}
                }
            }
            match backend {
                Some(b) => {
                    if let Some(w) = weight {
                        self.member_weight(&b, w as f64, mpos);
                    }
                    names.push(b);
                }
                None if !member.iter().any(|f| f.name == "backend") => {
                    self.error(mpos, "a director member needs '.backend'")
                }
                None => {}
            }
            if weighted && weight.is_none() && member.iter().all(|f| f.name != "weight") {
                self.error(
                    mpos,
                    "a member of a random, client or hash director needs '.weight'",
                );
            }
        }
        let hash_on = (kind == "client").then(|| "client_ip".to_string());
        self.origins.directors.push(DirectorConfig {
            name: name.to_string(),
            kind: dkind,
            backends: names,
            hash_on,
            restart_on: Vec::new(),
            restart_unless: Vec::new(),
            max_restarts: 4,
            member_weights: Vec::new(),
        });
    }

    /// Sets a member's weight in a random director (Shellac keeps weights on backends; a
    /// REAL weight becomes hundredths).
    pub(super) fn member_weight(&mut self, backend: &str, weight: f64, pos: Pos) {
        let scaled = (weight * 100.0).round();
        if !(1.0..=f64::from(u32::MAX)).contains(&scaled) {
            self.error(pos, format!("weight {weight} is out of range"));
            return;
        }
        let scaled = scaled as u32;
        if let Some(b) = self.origins.backends.iter_mut().find(|b| b.name == backend) {
            if b.weight != 1 && b.weight != scaled {
                let old = f64::from(b.weight) / 100.0;
                self.unsupported(
                    pos,
                    format!(
                        "backend {backend} has weight {old} in another random director: Shellac \
                         keeps one weight per backend"
                    ),
                );
                return;
            }
            b.weight = scaled;
        }
    }
}
