//! A recursive-descent parser from VCL tokens to the syntax tree, every dialect at once.

use super::ast::Stmt;
use super::ast::{AclEntry, Decl, Field, FieldValue, Pos, Vcl};
use super::error::VclError;
use super::lexer::{Tok, Token, lex_file};

/// Parses the VCL text `src` of the file named `file`.
pub fn parse(file: &str, src: &str) -> Result<Vcl, VclError> {
    parse_file(file, 0, src)
}

/// Parses the VCL text `src` of the file named `file`, which has index `index` in a loaded
/// source (every position carries it).
pub fn parse_file(file: &str, index: u16, src: &str) -> Result<Vcl, VclError> {
    let mut p = Parser::new(file, index, src)?;
    p.file_()
}

/// Parses `src` as the statements of a subroutine body: what an `include` inside a `sub`
/// splices in.
pub fn parse_body(file: &str, index: u16, src: &str) -> Result<Vec<Stmt>, VclError> {
    let mut p = Parser::new(file, index, src)?;
    p.statements_to_end()
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

impl<'a> Parser<'a> {
    fn new(file: &'a str, index: u16, src: &str) -> Result<Parser<'a>, VclError> {
        Ok(Parser {
            file,
            toks: lex_file(file, index, src)?,
            at: 0,
            depth: 0,
        })
    }

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
        VclError::new(self.file, pos, message)
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
            // Kept in quotes: the checker allows the form from VCL 4.1 only, and a quoted
            // name may hold '.', which an unquoted one may not.
            name.push('"');
            name.push_str(s);
            name.push('"');
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
        self.expect("{", "to open the table")?;
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
        let at = self.pos();
        let quoted = self.string("an address in quotes, such as \"10.0.0.0\"/8, or '}'")?;
        // Varnish >= 4.0 also takes the mask inside the quotes: "172.16.0.0/16".
        let (address, inside) = match quoted.split_once('/') {
            Some((addr, bits)) if !bits.is_empty() && bits.bytes().all(|b| b.is_ascii_digit()) => {
                let n = bits.parse::<u8>().map_err(|_| {
                    self.error_at(at, format!("the mask /{bits} is not a number of bits"))
                })?;
                (addr.to_string(), Some(n))
            }
            Some(_) => {
                return Err(self.error_at(at, format!("\"{quoted}\": .../mask is not numeric.")));
            }
            None => (quoted, None),
        };
        let mut mask = self.acl_mask_once(inside)?;
        if optional {
            self.expect(")", "after the optional address")?;
        }
        if mask.is_none() {
            mask = self.acl_mask()?;
        } else {
            self.acl_mask_once(mask)?;
        }
        self.expect(";", "after the address")?;
        Ok(AclEntry {
            negated,
            address,
            mask,
            optional,
            pos,
        })
    }

    /// `mask` if the quotes held one (a `/` after them is an error then), else `/ bits` after
    /// them, if there is one.
    fn acl_mask_once(&mut self, mask: Option<u8>) -> Result<Option<u8>, VclError> {
        match mask {
            Some(_) if self.is_op("/") => Err(self.error_at(
                self.pos(),
                "/mask only allowed once (the address in quotes has one)".to_string(),
            )),
            Some(m) => Ok(Some(m)),
            None => self.acl_mask(),
        }
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
