//! The built-in VCL of each dialect, appended to the operator's subroutines as Varnish does:
//! 4.x's builtin.vcl (unknown methods piped, every method but GET and HEAD passed, requests
//! with Authorization or Cookie passed) and 2.x's default.vcl (the same, plus
//! X-Forwarded-For, and `obj.cacheable` / `beresp.cacheable`).

use std::sync::OnceLock;

use super::ast::Vcl;
use super::parser::parse_file;
use super::types::{Dialect, Methods, ctx};

/// The file index built-in positions carry (no file of the operator's).
pub const BUILTIN_FILE: u16 = u16::MAX;

/// 4.x: the subroutines the built-in vcl_recv and vcl_backend_response are split into (as in
/// Varnish 7), with the subroutine they run in. A VCL may define them; its body runs before
/// the built-in one, which a bare `return;` skips.
pub const SPLIT_SUBS: &[(&str, Methods)] = &[
    ("vcl_req_host", ctx::RECV),
    ("vcl_req_method", ctx::RECV),
    ("vcl_req_authorization", ctx::RECV),
    ("vcl_req_cookie", ctx::RECV),
    ("vcl_beresp_stale", ctx::BE_RESPONSE),
    ("vcl_beresp_cookie", ctx::BE_RESPONSE),
    ("vcl_beresp_control", ctx::BE_RESPONSE),
    ("vcl_beresp_vary", ctx::BE_RESPONSE),
    ("vcl_beresp_hitmiss", ctx::BE_RESPONSE),
];

/// The subroutine a split subroutine of `dialect`'s built-in VCL runs in.
pub fn split_sub(name: &str, dialect: Dialect) -> Option<Methods> {
    if dialect.is_legacy() {
        return None;
    }
    SPLIT_SUBS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
}

/// Whether `name` is a built-in subroutine's (`vcl_recv`): not a split one.
pub fn is_method_name(name: &str, dialect: Dialect) -> bool {
    name.starts_with("vcl_") && split_sub(name, dialect).is_none()
}

const V4: &str = include_str!("builtin/builtin-4.vcl");
const V21: &str = include_str!("builtin/default-2.1.vcl");
const V20: &str = include_str!("builtin/default-2.0.vcl");

/// The text of the built-in VCL of `dialect`.
pub fn text(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::V20 => V20,
        Dialect::V21 => V21,
        Dialect::V40 | Dialect::V41 => V4,
    }
}

/// The built-in VCL of `dialect`, parsed once.
pub fn source(dialect: Dialect) -> &'static Vcl {
    static PARSED: [OnceLock<Vcl>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let i = match dialect {
        Dialect::V20 => 0,
        Dialect::V21 => 1,
        Dialect::V40 | Dialect::V41 => 2,
    };
    PARSED[i].get_or_init(|| {
        // Shellac's own text, parsed by its tests: an error here is a bug in this file.
        parse_file("<built-in VCL>", BUILTIN_FILE, text(dialect)).unwrap_or_else(|e| {
            panic!("the built-in VCL does not parse: {e}");
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses() {
        for d in [Dialect::V20, Dialect::V21, Dialect::V40, Dialect::V41] {
            assert!(!source(d).decls.is_empty());
        }
    }
}
