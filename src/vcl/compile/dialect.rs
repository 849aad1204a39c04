//! The dialect of a file: its `vcl` line, or for a file without one, VCL 2.0 or 2.1/3.0 by
//! what its `vcl_fetch` names.

use super::super::ast::{self, Decl, Pos};
use super::super::types::Dialect;

/// The dialect: the `vcl` line's version, or for files without one, 2.0 when `vcl_fetch`
/// uses `obj.*` and never `beresp.*`, else 2.1/3.0.
pub(super) fn dialect_of(vcl: &ast::Vcl) -> Result<Dialect, (Pos, String)> {
    if let Some((v, pos)) = &vcl.version {
        return match v.as_str() {
            "4.0" => Ok(Dialect::V40),
            "4.1" => Ok(Dialect::V41),
            other => Err((
                *pos,
                format!(
                    "VCL version {other} not supported (Shellac reads 4.0 and 4.1 files, and \
                     2.x/3.0 files, which have no 'vcl' line)"
                ),
            )),
        };
    }
    let mut obj = false;
    let mut beresp = false;
    for d in &vcl.decls {
        if let Decl::Sub { name, body, .. } = d
            && name == "vcl_fetch"
        {
            walk_names(body, &mut |n| {
                obj |= n.starts_with("obj.");
                beresp |= n.starts_with("beresp.");
            });
        }
    }
    Ok(if obj && !beresp {
        Dialect::V20
    } else {
        Dialect::V21
    })
}

/// Calls `f` with every name a body sets, unsets or reads.
fn walk_names(body: &[ast::Stmt], f: &mut dyn FnMut(&str)) {
    fn expr(e: &ast::Expr, f: &mut dyn FnMut(&str)) {
        match e {
            ast::Expr::Name(n, _) => f(n),
            ast::Expr::Call { args, .. } => args.iter().for_each(|a| expr(&a.value, f)),
            ast::Expr::Method { on, args, .. } => {
                expr(on, f);
                args.iter().for_each(|a| expr(&a.value, f));
            }
            ast::Expr::Unary { expr: e, .. } => expr(e, f),
            ast::Expr::Binary { left, right, .. } => {
                expr(left, f);
                expr(right, f);
            }
            ast::Expr::Concat { parts, .. } => parts.iter().for_each(|p| expr(p, f)),
            _ => {}
        }
    }
    for s in body {
        match s {
            ast::Stmt::Set { target, value, .. } => {
                f(target);
                expr(value, f);
            }
            ast::Stmt::Unset { target, .. } => f(target),
            ast::Stmt::If {
                branches,
                otherwise,
                ..
            } => {
                for (c, b) in branches {
                    expr(c, f);
                    walk_names(b, f);
                }
                if let Some(o) = otherwise {
                    walk_names(o, f);
                }
            }
            ast::Stmt::Block { body, .. } => walk_names(body, f),
            ast::Stmt::Expr { expr: e, .. } => expr(e, f),
            ast::Stmt::Action { args, .. } => args.iter().for_each(|a| expr(a, f)),
            ast::Stmt::Return {
                action: Some(a), ..
            } => expr(a, f),
            _ => {}
        }
    }
}
