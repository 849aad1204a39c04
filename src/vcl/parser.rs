//! A recursive-descent parser from VCL tokens to the syntax tree, every dialect at once.

use super::ast::{AclEntry, Decl, Field, FieldValue, Pos, Vcl};
use super::error::VclError;
use super::lexer::{Tok, Token, lex};

/// Parses the VCL text `src` of the file named `file`.
pub fn parse(file: &str, src: &str) -> Result<Vcl, VclError> {
    let toks = lex(file, src)?;
    let mut p = Parser {
        file,
        toks,
        at: 0,
        depth: 0,
    };
    p.file_()
}

pub(super) struct Parser<'a> {
    pub(super) file: &'a str,
    pub(super) toks: Vec<Token>,
    pub(super) at: usize,
    /// How many blocks and expressions are open, bounded so a hostile file cannot overflow
    /// the stack.
    pub(super) depth: u32,
}

/// The deepest nesting of blocks and parenthesised expressions read.
const MAX_DEPTH: u32 = 200;

impl Parser<'_> {
    /// Enters one more level of nesting; `leave` undoes it.
    pub(super) fn enter(&mut self) -> Result<(), VclError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error_at(
                self.pos(),
                format!("blocks or expressions nest deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.depth -= 1;
    }

    pub(super) fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    pub(super) fn peek_at(&self, ahead: usize) -> &Tok {
        // The lexer always ends with Eof, and nothing moves past it.
        let last = self.toks.len().saturating_sub(1);
        &self.toks[(self.at + ahead).min(last)].tok
    }

    pub(super) fn pos(&self) -> Pos {
        let last = self.toks.len().saturating_sub(1);
        self.toks[self.at.min(last)].pos
    }

    pub(super) fn next(&mut self) -> Tok {
        let tok = self.peek().clone();
        if tok != Tok::Eof {
            self.at += 1;
        }
        tok
    }

    pub(super) fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Tok::Op(o) if *o == op)
    }

    pub(super) fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Tok::Ident(w) if w == word)
    }

    /// Takes `op` if it is next.
    pub(super) fn eat(&mut self, op: &str) -> bool {
        let here = self.is_op(op);
        if here {
            self.at += 1;
        }
        here
    }

    /// An error at the next token: "expected WHAT, found THAT".
    pub(super) fn expected(&self, what: &str) -> VclError {
        self.error_at(
            self.pos(),
            format!("expected {what}, found {}", self.peek().describe()),
        )
    }

    pub(super) fn error_at(&self, pos: Pos, message: String) -> VclError {
        VclError {
            file: self.file.to_string(),
            pos,
            message,
        }
    }

    pub(super) fn expect(&mut self, op: &str, what: &str) -> Result<(), VclError> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(self.expected(&format!("'{op}' {what}")))
        }
    }

    pub(super) fn ident(&mut self, what: &str) -> Result<String, VclError> {
        match self.peek() {
            Tok::Ident(w) => {
                let w = w.clone();
                self.at += 1;
                Ok(w)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// The name a declaration gives (backend, probe, ACL, director, sub, object): no `.`,
    /// which would make it read as a field of another name. (`-` is legal since 4.0; the
    /// checker refuses it in 2.x files.)
    pub(super) fn decl_name(&mut self, what: &str) -> Result<String, VclError> {
        let pos = self.pos();
        let name = self.ident(what)?;
        if name.contains('.') {
            return Err(self.error_at(
                pos,
                format!("the name '{name}' may not hold '.' (letters, digits, '_' and '-' only)"),
            ));
        }
        Ok(name)
    }

    /// A name that may end in a quoted part: `req.http."x-y"` (VCL 4.1) or a plain name.
    pub(super) fn name(&mut self, what: &str) -> Result<String, VclError> {
        let mut name = self.ident(what)?;
        if name.ends_with('.')
            && let Tok::Str(s) = self.peek()
        {
            // A field name is an HTTP token (RFC 9110 tchar), quoted or not.
            let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if let Some(bad) = s.chars().find(|c| !tchar(*c)) {
                return Err(
                    self.error_at(self.pos(), format!("a header name may not hold {bad:?}"))
                );
            }
            name.push_str(s);
            self.at += 1;
        }
        Ok(name)
    }

    fn file_(&mut self) -> Result<Vcl, VclError> {
        let mut version = None;
        if self.is_word("vcl") {
            let pos = self.pos();
            self.at += 1;
            let Tok::Number(v) = self.peek().clone() else {
                return Err(self.expected("a version number after 'vcl' (as in 'vcl 4.1;')"));
            };
            self.at += 1;
            // `vcl 4.1 syntax ...;` and similar trailing words are not Varnish's; refuse them.
            self.expect(";", "after the 'vcl' version line")?;
            version = Some((v, pos));
        }
        let mut decls = Vec::new();
        while *self.peek() != Tok::Eof {
            decls.push(self.decl()?);
        }
        Ok(Vcl { version, decls })
    }

    fn decl(&mut self) -> Result<Decl, VclError> {
        let pos = self.pos();
        let word = match self.next() {
            Tok::Ident(w) => w,
            Tok::CCode(_) => return Ok(Decl::CCode { pos }),
            _ => {
                // `file_` stops at Eof, so `next` moved past this token.
                self.at -= 1;
                return Err(self.expected(
                    "a declaration ('vcl', 'import', 'include', 'backend', 'probe', 'acl', \
                     'director', 'sub' or 'unused')",
                ));
            }
        };
        match word.as_str() {
            "import" => {
                let name = self.ident("the name of the module to import")?;
                let alias = if self.is_word("as") {
                    self.at += 1;
                    Some(self.ident("the name to import the module as, after 'as'")?)
                } else {
                    None
                };
                let from = if self.is_word("from") {
                    self.at += 1;
                    Some(self.string("the path of the module after 'from'")?)
                } else {
                    None
                };
                self.expect(";", "after the import")?;
                Ok(Decl::Import {
                    name,
                    alias,
                    from,
                    pos,
                })
            }
            "include" => {
                let (path, glob) = self.include()?;
                Ok(Decl::Include { path, glob, pos })
            }
            "backend" => {
                let name = self.decl_name("the backend's name")?;
                if self.is_word("none") || self.is_word("None") {
                    self.at += 1;
                    self.expect(";", "after 'none'")?;
                    return Ok(Decl::Backend {
                        name,
                        fields: None,
                        pos,
                    });
                }
                let fields = self.table("the backend's settings")?;
                Ok(Decl::Backend {
                    name,
                    fields: Some(fields),
                    pos,
                })
            }
            "probe" => {
                let name = self.decl_name("the probe's name")?;
                let fields = self.table("the probe's settings")?;
                Ok(Decl::Probe { name, fields, pos })
            }
            "acl" => self.acl(pos),
            "unused" => {
                let name = self.ident("the name of the declaration that may go unused")?;
                self.expect(";", "after 'unused NAME'")?;
                Ok(Decl::Unused { name, pos })
            }
            "director" => self.director(pos),
            "sub" => {
                let name = self.decl_name("the subroutine's name")?;
                let body = self.block()?;
                Ok(Decl::Sub { name, body, pos })
            }
            _ => Err(self.error_at(
                pos,
                format!(
                    "expected a declaration ('vcl', 'import', 'include', 'backend', 'probe', \
                     'acl', 'director', 'sub' or 'unused'), found '{word}'"
                ),
            )),
        }
    }

    /// After `include`: `[+glob] "path";`, the path and whether it is a glob.
    pub(super) fn include(&mut self) -> Result<(String, bool), VclError> {
        let glob = self.is_op("+") && matches!(self.peek_at(1), Tok::Ident(w) if w == "glob");
        if glob {
            self.at += 2;
        }
        let path = self.string("the file to include, in quotes")?;
        self.expect(";", "after the include")?;
        Ok((path, glob))
    }

    pub(super) fn string(&mut self, what: &str) -> Result<String, VclError> {
        match self.peek() {
            Tok::Str(s) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// `{ .name = value; ... }` of a backend, probe or director member.
    pub(super) fn table(&mut self, what: &str) -> Result<Vec<Field>, VclError> {
        self.expect("{", &format!("to open {what}"))?;
        let mut fields = Vec::new();
        while !self.eat("}") {
            fields.push(self.field()?);
        }
        Ok(fields)
    }

    /// `.name = value;` where value is an expression or a nested table.
    pub(super) fn field(&mut self) -> Result<Field, VclError> {
        let pos = self.pos();
        if !self.eat(".") {
            return Err(self.expected("a setting such as '.host = \"...\";' or '}'"));
        }
        let name = self.ident("the setting's name after '.'")?;
        self.expect("=", &format!("after '.{name}'"))?;
        let value = if self.is_op("{") {
            self.table_or_list()?
        } else {
            let value = FieldValue::Expr(self.expr()?);
            self.expect(";", &format!("after the value of '.{name}'"))?;
            value
        };
        Ok(Field { name, value, pos })
    }

    /// A nested table; with address entries (2.x DNS directors' `.list`) it is a list.
    fn table_or_list(&mut self) -> Result<FieldValue, VclError> {
        self.expect("{", "")?;
        let mut fields = Vec::new();
        let mut entries = Vec::new();
        while !self.eat("}") {
            if self.is_op(".") {
                fields.push(self.field()?);
            } else {
                entries.push(self.acl_entry()?);
            }
        }
        // `.probe = { ... };` is written with and without the trailing `;`.
        self.eat(";");
        if entries.is_empty() {
            Ok(FieldValue::Table(fields))
        } else {
            Ok(FieldValue::List { fields, entries })
        }
    }

    fn acl(&mut self, pos: Pos) -> Result<Decl, VclError> {
        let name = self.decl_name("the ACL's name")?;
        let mut flags = Vec::new();
        while self.is_op("+") || self.is_op("-") {
            // The loop's condition guarantees one of the two signs is next.
            let sign = if self.eat("+") {
                "+"
            } else {
                self.at += 1;
                "-"
            };
            flags.push(format!(
                "{sign}{}",
                self.ident("a flag name after '+' or '-'")?
            ));
        }
        self.expect("{", "to open the ACL's entries")?;
        let mut entries = Vec::new();
        while !self.eat("}") {
            entries.push(self.acl_entry()?);
        }
        Ok(Decl::Acl {
            name,
            flags,
            entries,
            pos,
        })
    }

    /// `[!] "address" [/ mask];` or `[!] ( "name" ) [/ mask];`.
    fn acl_entry(&mut self) -> Result<AclEntry, VclError> {
        let pos = self.pos();
        let mut negated = self.eat("!");
        let optional = self.eat("(");
        // Both `!("name")` and `(!"name")` are written.
        negated |= optional && self.eat("!");
        let address = self.string("an address in quotes, such as \"10.0.0.0\"/8, or '}'")?;
        let mask = self.acl_mask()?;
        if optional {
            self.expect(")", "after the optional address")?;
        }
        let mask = match mask {
            Some(m) => Some(m),
            None => self.acl_mask()?,
        };
        self.expect(";", "after the address")?;
        Ok(AclEntry {
            negated,
            address,
            mask,
            optional,
            pos,
        })
    }

    /// `/ bits` after an ACL address, if there is one.
    fn acl_mask(&mut self) -> Result<Option<u8>, VclError> {
        Ok(if self.eat("/") {
            let at = self.pos();
            let Tok::Number(n) = self.peek().clone() else {
                return Err(self.expected("a mask length after '/', such as 24"));
            };
            self.at += 1;
            Some(
                n.parse::<u8>().map_err(|_| {
                    self.error_at(at, format!("the mask /{n} is not a number of bits"))
                })?,
            )
        } else {
            None
        })
    }

    /// 2.x `director NAME KIND { .field = v; { .backend = b; .weight = 1; } ... }`.
    fn director(&mut self, pos: Pos) -> Result<Decl, VclError> {
        let name = self.decl_name("the director's name")?;
        let kind = self.ident("the director's kind (random, round-robin, client, hash, ...)")?;
        self.expect("{", "to open the director")?;
        let mut fields = Vec::new();
        let mut members = Vec::new();
        while !self.eat("}") {
            if self.is_op("{") {
                members.push(self.table("a member of the director")?);
            } else {
                fields.push(self.field()?);
            }
        }
        Ok(Decl::Director {
            name,
            kind,
            fields,
            members,
            pos,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcl::ast::{Expr, Stmt};

    fn ok(src: &str) -> Vcl {
        parse("t.vcl", src).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(src: &str) -> String {
        parse("t.vcl", src)
            .expect_err("must be refused")
            .to_string()
    }

    fn body(vcl: &Vcl) -> &[Stmt] {
        match vcl.decls.last() {
            Some(Decl::Sub { body, .. }) => body,
            other => panic!("not a sub: {other:?}"),
        }
    }

    #[test]
    fn modern_file_with_backend_probe_acl_and_sub() {
        let v = ok(r#"vcl 4.1;
            import std;
            import directors as d from "/lib/vmod.so";
            include "other.vcl";
            probe healthy { .url = "/"; .interval = 5s; .window = 5; .threshold = 3; }
            backend web { .host = "10.0.0.1"; .port = "8080"; .probe = healthy; }
            backend spare { .host = "10.0.0.2"; .probe = { .request = "GET / HTTP/1.1" "Host: x"; } }
            backend off none;
            acl purgers { "localhost"; "10.0.0.0"/8; !"10.0.0.5"; ("maybe.example"); }
            sub vcl_init { new rr = directors.round_robin(); rr.add_backend(web); }
            sub vcl_recv {
                if (req.method == "PURGE" && client.ip ~ purgers) { return (purge); }
                elsif (req.url ~ "^/admin") { return (pass); }
                else if (!req.http.Cookie) { unset req.http.Cookie; }
                else { set req.http.X = std.tolower(regsub(req.url, "\?.*$", "")) + "-x"; }
                hash_data(req.url);
                return (synth(503, "Down"));
            }"#);
        assert_eq!(v.version.as_ref().map(|v| v.0.as_str()), Some("4.1"));
        assert_eq!(v.decls.len(), 10);
        let Some(Decl::Import { alias, from, .. }) = v.decls.get(1) else {
            panic!()
        };
        assert_eq!(
            (alias.as_deref(), from.as_deref()),
            (Some("d"), Some("/lib/vmod.so"))
        );
        let Some(Decl::Acl { entries, .. }) = v.decls.get(7) else {
            panic!()
        };
        assert_eq!(entries[1].mask, Some(8));
        assert!(entries[2].negated && entries[3].optional);
        let stmts = body(&v);
        assert!(
            matches!(&stmts[0], Stmt::If { branches, otherwise: Some(_), .. } if branches.len() == 3)
        );
        assert!(
            matches!(&stmts[2], Stmt::Return { action: Some(Expr::Call { func, args, .. }), .. }
            if func == "synth" && args.len() == 2)
        );
    }

    #[test]
    fn old_dialect_directors_actions_and_juxtaposition() {
        let v = ok(r#"
            backend a { .host = "a"; }
            director d random { .retries = 3; { .backend = a; .weight = 1; }
                { .backend = { .host = "b"; .port = "81"; }; .weight = 2; } }
            director dns_d dns { .list = { .port = "80"; "192.168.15.0"/24; } .ttl = 5m; }
            sub vcl_fetch {
                if (obj.ttl < 120s) { set obj.ttl = 1.5m; }
                set req.hash += req.url;
                set req.http.X = "a" req.url "b";
                esi;
                error 503 "Service" " unavailable";
                remove req.http.Cookie;
                lookup;
            }"#);
        assert!(v.version.is_none());
        let Some(Decl::Director {
            kind,
            members,
            fields,
            ..
        }) = v.decls.get(1)
        else {
            panic!()
        };
        assert_eq!(
            (kind.as_str(), members.len(), fields.len()),
            ("random", 2, 1)
        );
        let Some(Decl::Director { fields, .. }) = v.decls.get(2) else {
            panic!()
        };
        assert!(matches!(&fields[0].value, FieldValue::List { entries, .. } if entries.len() == 1));
        let stmts = body(&v);
        assert!(matches!(&stmts[1], Stmt::Set { op: "+=", .. }));
        assert!(matches!(
            &stmts[2],
            Stmt::Set {
                value: Expr::Binary { op: "+", .. },
                ..
            }
        ));
        assert!(matches!(&stmts[4], Stmt::Action { name, args, .. }
            if name == "error" && args.len() == 2 && matches!(args[0], Expr::Number(..))));
        assert!(matches!(&stmts[5], Stmt::Unset { .. }));
        assert!(
            matches!(&stmts[6], Stmt::Action { name, args, .. } if name == "lookup" && args.is_empty())
        );
    }

    #[test]
    fn precedence_follows_varnish() {
        let v = ok("sub s { if (a || b && !c ~ \"x\") { call t; } }");
        let Some(Stmt::If { branches, .. }) = body(&v).first() else {
            panic!()
        };
        let Expr::Binary {
            op: "||", right, ..
        } = &branches[0].0
        else {
            panic!()
        };
        let Expr::Binary {
            op: "&&", right, ..
        } = right.as_ref()
        else {
            panic!()
        };
        let Expr::Unary { op: "!", expr, .. } = right.as_ref() else {
            panic!()
        };
        assert!(matches!(expr.as_ref(), Expr::Binary { op: "~", .. }));
    }

    #[test]
    fn quoted_header_names_and_methods_on_values() {
        let v = ok(r#"sub s { set resp.http."x~y" = resp.http."a".upper(); std.log(s = "n"); }"#);
        assert!(
            matches!(&body(&v)[0], Stmt::Set { target, value: Expr::Method { .. }, .. }
            if target == "resp.http.x~y")
        );
        assert!(err("sub s { set req.http.{\"a\nb\"} = \"x\"; }").contains("may not hold '\\n'"));
        assert!(err("sub foo.bar { }").contains("may not hold '.'"));
        ok("acl my-acl { \"localhost\"; } sub my-sub { }");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!(
            "sub s {{ set x = {}1{}; }}",
            "(".repeat(100_000),
            ")".repeat(100_000)
        );
        assert!(err(&deep).contains("nest deeper than 200 levels"));
        let deep = format!("sub s {}{}", "{".repeat(100_000), "}".repeat(100_000));
        assert!(err(&deep).contains("nest deeper than 200 levels"));
        let deep = format!("sub s {{ set x = {}1; }}", "!".repeat(100_000));
        assert!(err(&deep).contains("nest deeper than 200 levels"));
        ok(&format!(
            "sub s {{ set x = {}1{}; }}",
            "(".repeat(60),
            ")".repeat(60)
        ));
    }

    /// Every prefix and every one-byte deletion of a real file parses or errs, never panics.
    #[test]
    fn damaged_files_never_panic() {
        let src = "vcl 4.1; import std; backend b { .host = \"h\"; .probe = { .url = \"/\"; } }\n\
                   acl a { \"10.0.0.0\"/8; !(\"x\"); } sub vcl_recv { if (req.url ~ \"^/a\" && \
                   !req.http.X) { set req.http.Y = regsub(req.url, \"x\", \"y\") + \"z\"; } \
                   elsif (req.restarts > 0) { return (synth(503, {\"long\"})); } \
                   else { unset req.http.Cookie; call other; } } director d random { { .backend = b; } }\
                   sub other { error 503 \"x\"; set obj.ttl = 1.5m; hash_data(:AQID:); }";
        ok(src);
        for cut in 0..src.len() {
            if src.is_char_boundary(cut) {
                let _ = parse("t.vcl", &src[..cut]);
                let mut damaged = src.to_string();
                damaged.remove(cut);
                let _ = parse("t.vcl", &damaged);
            }
        }
    }

    #[test]
    fn include_at_top_level_and_in_a_sub() {
        let v = ok("include +glob \"conf.d/*.vcl\"; sub vcl_recv { include \"recv.vcl\"; }");
        assert!(
            matches!(&v.decls[0], Decl::Include { path, glob: true, .. } if path == "conf.d/*.vcl")
        );
        assert!(
            matches!(&body(&v)[0], Stmt::Include { path, glob: false, .. } if path == "recv.vcl")
        );
        assert!(err("include recv.vcl;").contains("expected the file to include, in quotes"));
    }

    #[test]
    fn inline_c_is_kept_to_be_refused() {
        let v = ok("C{ #include <stdio.h> }C sub s { C{ x(); }C }");
        assert!(matches!(v.decls[0], Decl::CCode { .. }));
        assert!(matches!(body(&v)[0], Stmt::CCode { .. }));
    }

    #[test]
    fn errors_say_where_and_what_was_expected() {
        assert_eq!(
            err("sub vcl_recv {\n  set req.url \"x\";\n}"),
            "t.vcl:2:15: expected '=' after 'set req.url', found the string \"x\""
        );
        assert_eq!(
            err("backend b { host = \"x\"; }"),
            "t.vcl:1:13: expected a setting such as '.host = \"...\";' or '}', found 'host'"
        );
        assert_eq!(
            err("sub s {\n  pass;\n"),
            "t.vcl:3:1: expected '}' to close the block, found the end of the file"
        );
        assert!(
            err("vcl 4.1\nsub s {}")
                .starts_with("t.vcl:2:1: expected ';' after the 'vcl' version line")
        );
        assert!(err("sub s { req.url = \"/\"; }").contains("write 'set req.url = ...;'"));
        assert!(err("sub s { return pass; }").contains("expected '(' after 'return'"));
        assert!(err("acl a { \"1.2.3.4\"/x; }").contains("expected a mask length"));
        assert!(err("frobnicate x;").contains("expected a declaration"));
        assert!(err("sub s { set x = ; }").contains("expected a value"));
        assert!(err("sub s { set req.url = \"foo\" if \"bar\"; }").contains("'if' is a keyword"));
        assert!(err("sub s { purge_url(if); }").contains("'if' is a keyword"));
    }
}
