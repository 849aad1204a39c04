//! 2.x's bare actions (`lookup;`, `pass;`, `error 503 "x";`, `esi;`, `purge_url(...)`, `log`)
//! and the legacy `purge` / `ban` conditions, as statements.

use super::super::ast::{self, Pos};
use super::super::ir::{Action, Expr, Func, Stmt, Text};
use super::super::types::Type;
use super::Checker;

/// The words 2.x takes as actions of their own (`lookup;`, `restart rollback;`).
const ACTION_WORDS: [&str; 10] = [
    "lookup",
    "pass",
    "pipe",
    "deliver",
    "fetch",
    "restart",
    "hash",
    "discard",
    "keep",
    "hit_for_pass",
];

impl Checker<'_> {
    /// A 2.x bare action or statement word: `lookup;`, `error 503 "x";`, `purge_url(...)`,
    /// `synthetic "...";`.
    pub(super) fn bare_action(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        pos: Pos,
        out: &mut Vec<Stmt>,
    ) {
        if !self.dialect.is_legacy() {
            if ACTION_WORDS.contains(&name) || name == "error" {
                self.error(
                    pos,
                    format!("'{name};' is VCL 2.x; in VCL 4.x write 'return ({name});'"),
                );
            } else {
                self.error(pos, format!("Symbol not found: '{name}' (not a statement)"));
            }
            return;
        }
        match name {
            "error" => self.legacy_error(args, pos, out),
            "synthetic" => {
                if args.len() != 1 {
                    self.error(pos, "synthetic takes one string");
                    return;
                }
                let (e, _) = self.call(
                    "synthetic",
                    &[ast::Arg {
                        name: None,
                        value: args[0].clone(),
                    }],
                    pos,
                );
                if let Expr::Call(f, a) = e {
                    out.push(Stmt::Effect(f, a, pos));
                }
            }
            "purge" if args.is_empty() => self.purge_now(pos, out),
            "purge" | "ban" => self.legacy_ban(args, pos, out),
            "purge_url" | "ban_url" => {
                if args.len() != 1 {
                    self.error(pos, format!("{name} takes one regular expression"));
                    return;
                }
                let v = self.stringify(&args[0]);
                out.push(Stmt::Effect(Func::BanUrl, Box::new([v]), pos));
            }
            "purge_hash" => {
                self.unsupported(
                    pos,
                    "purge_hash: Shellac bans by URL, host and object fields",
                );
            }
            // 2.x `esi;`: `set beresp.do_esi = true`.
            "esi" => self.set(
                "beresp.do_esi",
                "=",
                &ast::Expr::Name("true".to_string(), pos),
                pos,
                out,
            ),
            "panic" => self.unsupported(pos, "panic: Shellac does not stop on a VCL statement"),
            "rollback" => out.push(Stmt::Effect(Func::Rollback, Box::new([]), pos)),
            "log" => {
                if args.len() != 1 {
                    self.error(pos, "log takes one string");
                    return;
                }
                let v = self.stringify(&args[0]);
                out.push(Stmt::Effect(Func::StdLog, Box::new([v]), pos));
            }
            w if ACTION_WORDS.contains(&w) => self.action_words(w, args, pos, out),
            other => self.error(
                pos,
                format!("Symbol not found: '{other}' (not a statement)"),
            ),
        }
    }

    /// `error 503 "x";`, `error 503;`, and 2.x's `error "x";` (status 503).
    fn legacy_error(&mut self, args: &[ast::Expr], pos: Pos, out: &mut Vec<Stmt>) {
        if args.len() > 2 {
            self.error(pos, "error takes a status and an optional reason");
            return;
        }
        let (status, reason) = match args.first() {
            None => (None, None),
            Some(first) => {
                let (e, t) = self.expr(first, Some(Type::Int));
                match t {
                    Type::String | Type::Header if args.len() == 1 => {
                        (None, Some(Box::new(self.coerce(e, t, Type::String, pos))))
                    }
                    _ => (
                        Some(Box::new(self.coerce(e, t, Type::Int, first.pos()))),
                        args.get(1).map(|a| Box::new(self.stringify(a))),
                    ),
                }
            }
        };
        if self.allowed("error", pos) {
            out.push(Stmt::Return(Action::Synth(status, reason), pos));
        }
    }

    /// Varnish 3.0's `purge;` (no condition) in vcl_hit / vcl_miss: every variant of the
    /// request's object expires now (vcc's `VRT_purge(ctx, 0, 0)`, what vmod_purge's
    /// `purge.hard()` does); the subroutine goes on (`error 200 "Purged";` follows).
    fn purge_now(&mut self, pos: Pos, out: &mut Vec<Stmt>) {
        use super::super::types::ctx::{HIT, MISS};
        if self.here != 0 && self.here & !(HIT | MISS) != 0 {
            let outside = Self::method_names(self.here & !(HIT | MISS));
            self.error(
                pos,
                format!(
                    "'purge;' (Varnish 3.0) is only possible in vcl_hit and vcl_miss, not in '{}'; \
                     to ban, write purge(CONDITION) or ban(\"...\")",
                    outside.first().copied().unwrap_or("?")
                ),
            );
            return;
        }
        out.push(Stmt::Effect(Func::PurgeHard, Box::new([]), pos));
    }

    /// An action word `w`; 2.x read further action words as actions of their own (`restart
    /// rollback;`).
    fn action_words(&mut self, w: &str, args: &[ast::Expr], pos: Pos, out: &mut Vec<Stmt>) {
        let mut rest = Vec::new();
        for a in args {
            match a {
                ast::Expr::Name(n, p)
                    if ACTION_WORDS.contains(&n.as_str()) || n == "rollback" || n == "error" =>
                {
                    rest.push((n.clone(), *p))
                }
                _ => {
                    self.error(pos, format!("'{w}' takes no arguments"));
                    return;
                }
            }
        }
        if let Some(a) = self.action_word(w, &[], pos)
            && self.allowed(w, pos)
        {
            out.push(Stmt::Return(a, pos));
        }
        for (n, p) in rest {
            self.bare_action(&n, &[], p, out);
        }
    }

    /// 2.x `purge(req.url ~ "x" && req.http.host == req.http.host)` or `purge("expr")`: a
    /// ban whose values are computed now.
    fn legacy_ban(&mut self, args: &[ast::Expr], pos: Pos, out: &mut Vec<Stmt>) {
        if args.len() != 1 {
            self.error(
                pos,
                "purge takes one condition, as in purge(req.url ~ \"^/news\") (or 'purge;' alone in vcl_hit / vcl_miss)",
            );
            return;
        }
        let mut parts: Vec<Expr> = Vec::new();
        if !self.ban_terms(&args[0], &mut parts) {
            return;
        }
        out.push(Stmt::Effect(
            Func::Ban,
            Box::new([Expr::Concat(parts.into_boxed_slice())]),
            pos,
        ));
    }

    fn ban_terms(&mut self, e: &ast::Expr, parts: &mut Vec<Expr>) -> bool {
        match e {
            ast::Expr::Binary {
                op: "&&",
                left,
                right,
                ..
            } => {
                if !self.ban_terms(left, parts) {
                    return false;
                }
                parts.push(Expr::Str(Text::new(" && ")));
                self.ban_terms(right, parts)
            }
            ast::Expr::Binary {
                op,
                left,
                right,
                pos,
            } if ["==", "!=", "~", "!~"].contains(op) => {
                let ast::Expr::Name(field, fpos) = &**left else {
                    self.error(*pos, "a purge condition starts with a field, as req.url");
                    return false;
                };
                let known = field == "req.url"
                    || field == "req.http.host"
                    || field == "obj.status"
                    || field.len() > 9 && field.starts_with("obj.http.")
                    || field.len() > 9 && field.starts_with("req.http.");
                if !known {
                    self.error(
                        *fpos,
                        format!("Symbol not found: '{field}' (a purge can test req.url, req.http.NAME, obj.status, obj.http.NAME)"),
                    );
                    return false;
                }
                parts.push(Expr::Str(Text::new(&format!("{field} {op} "))));
                parts.push(self.stringify(right));
                true
            }
            other => {
                parts.push(self.stringify(other));
                true
            }
        }
    }
}
