//! Constant values: a declaration's fields, constant strings, duration and size units.

use super::super::ast::{self, Expr};

/// A constant value of a declaration's field.
pub(super) enum Const {
    Str(String),
    /// Juxtaposed strings, kept apart (a probe's request lines).
    Lines(Vec<String>),
    Int(i64),
    Duration(f64),
}

/// The seconds of a duration unit (`None`: not a time unit).
pub(crate) fn duration_unit(unit: &str) -> Option<f64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "w" => 604_800.0,
        "y" => 31_536_000.0,
        _ => return None,
    })
}

/// The bytes of a size unit (`None`: not a size unit).
pub(crate) fn size_unit(unit: &str) -> Option<f64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1024.0 * 1024.0,
        "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" => 1024f64.powi(4),
        "p" | "pb" => 1024f64.powi(5),
        _ => return None,
    })
}

pub(super) fn const_of(e: &Expr) -> Option<Const> {
    Some(match e {
        Expr::Str(s, _) => Const::Str(s.clone()),
        Expr::Concat { parts, .. } => {
            let mut lines = Vec::new();
            for p in parts {
                match p {
                    Expr::Str(s, _) => lines.push(s.clone()),
                    _ => return None,
                }
            }
            Const::Lines(lines)
        }
        Expr::Number(n, _) if !n.contains('.') => Const::Int(n.parse().ok()?),
        Expr::Quantity(n, u, _) => Const::Duration(n.parse::<f64>().ok()? * duration_unit(u)?),
        _ => return None,
    })
}

/// The text of a constant string expression: a literal, literals side by side, or joined
/// with `+`.
pub(super) fn const_str(e: &ast::Expr) -> Option<String> {
    match e {
        ast::Expr::Str(s, _) => Some(s.clone()),
        ast::Expr::Concat { parts, .. } => {
            let mut out = String::new();
            for p in parts {
                out.push_str(&const_str(p)?);
            }
            Some(out)
        }
        ast::Expr::Binary {
            op: "+",
            left,
            right,
            ..
        } => Some(const_str(left)? + &const_str(right)?),
        _ => None,
    }
}
