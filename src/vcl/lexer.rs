//! VCL's tokens with their positions: what Varnish's vcc_token.c splits a VCL file into.

use super::ast::Pos;
use super::error::VclError;

/// One token of VCL.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A name: letters, digits, `_`, `.` and `-` after a first letter, as Varnish allows
    /// (`req.http.X-Forwarded-For`, `std.tolower`, `vcl_recv`). A name ending in `.` is the
    /// head of a quoted field name (`req.http."x"`, VCL 4.1).
    Ident(String),
    /// A string literal's value: `"..."` (one line), `{"..."}` or `"""..."""` (any lines).
    Str(String),
    /// A number as written (`3`, `1.5`).
    Number(String),
    /// A number with a unit (`120s`, `1.5 m`, `10KB`): value and unit as written. Whether it
    /// is a DURATION or BYTES is the context's decision, as in vcc (`1m`: minute or MiB).
    Quantity(String, String),
    /// A BLOB literal `:base64:` (trunk): the text between the colons.
    Blob(String),
    /// An operator or punctuation (`==`, `{`, `;`, `.` ...).
    Op(&'static str),
    /// An inline C block `C{ ... }C`, kept so it can be refused by name later.
    CCode(String),
    /// The end of the file.
    Eof,
}

/// A `"..."` string that reaches a newline.
const ONE_LINE_STRING: &str = "the string runs past the end of its line (a \"...\" string is one line; use {\"...\"} for several)";

impl Tok {
    /// How an operator reads this token in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Str(s) => {
                let shown: String = s.chars().take(24).collect();
                let more = if shown.len() < s.len() { "..." } else { "" };
                format!("the string {:?}", format!("{shown}{more}"))
            }
            Tok::Number(n) => format!("the number {n}"),
            Tok::Quantity(n, u) => format!("the quantity {n}{u}"),
            Tok::Blob(_) => "a BLOB literal (:...:)".to_string(),
            Tok::Op(o) => format!("'{o}'"),
            Tok::CCode(_) => "an inline C block (C{ ... }C)".to_string(),
            Tok::Eof => "the end of the file".to_string(),
        }
    }
}

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

/// Longest first, so `==` is not read as `=` `=`.
const OPS: &[&str] = &[
    "==", "!=", "<=", ">=", "!~", "&&", "||", "+=", "-=", "*=", "/=", "++", "--", "~", "<", ">",
    "!", "+", "-", "*", "/", "=", "{", "}", "(", ")", ";", ",", ".", "%",
];

/// Units Varnish accepts after a number, matched without regard to case: durations (ms s m
/// h d w y) and sizes (b k kb m mb g gb t tb p pb; VNUM_bytes_unit).
const UNITS: &[&str] = &[
    "ms", "s", "m", "h", "d", "w", "y", "b", "k", "kb", "mb", "g", "gb", "t", "tb", "p", "pb",
];

/// Splits `src` (the text of `file`) into tokens, ending with `Tok::Eof`.
pub fn lex(file: &str, src: &str) -> Result<Vec<Token>, VclError> {
    lex_file(file, 0, src)
}

/// Like [`lex`], for the file with index `index` in a loaded source (positions carry it).
pub fn lex_file(file: &str, index: u16, src: &str) -> Result<Vec<Token>, VclError> {
    Lexer {
        file,
        index,
        src: src.as_bytes(),
        text: src,
        at: 0,
        line: 1,
        col: 1,
    }
    .run()
}

struct Lexer<'a> {
    file: &'a str,
    index: u16,
    src: &'a [u8],
    text: &'a str,
    at: usize,
    line: u32,
    col: u32,
}

impl Lexer<'_> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
            file: self.index,
        }
    }

    fn error(&self, pos: Pos, message: String) -> VclError {
        VclError::new(self.file, pos, message)
    }

    fn peek(&self, ahead: usize) -> u8 {
        self.src.get(self.at + ahead).copied().unwrap_or(0)
    }

    fn starts_with(&self, s: &str) -> bool {
        self.src[self.at..].starts_with(s.as_bytes())
    }

    /// Moves over `n` bytes, counting lines and columns (columns in characters).
    fn bump(&mut self, n: usize) {
        for _ in 0..n {
            let Some(&b) = self.src.get(self.at) else {
                return;
            };
            self.at += 1;
            if b == b'\n' {
                self.line += 1;
                self.col = 1;
            } else if b & 0xC0 != 0x80 {
                self.col += 1;
            }
        }
    }

    /// The text from `start` to here (always on character boundaries: tokens end at ASCII).
    fn since(&self, start: usize) -> String {
        self.text
            .get(start..self.at)
            .unwrap_or_default()
            .to_string()
    }

    /// Reads up to `end`, returning the text before it and moving past it.
    fn until(&mut self, end: &str, pos: Pos, what: &str) -> Result<String, VclError> {
        match self.text[self.at..].find(end) {
            Some(len) => {
                let body = self.text[self.at..self.at + len].to_string();
                self.bump(len + end.len());
                Ok(body)
            }
            None => Err(self.error(pos, format!("{what} is never closed"))),
        }
    }

    fn run(mut self) -> Result<Vec<Token>, VclError> {
        let mut out = Vec::new();
        loop {
            self.skip_blanks()?;
            let pos = self.pos();
            if self.at >= self.src.len() {
                out.push(Token { tok: Tok::Eof, pos });
                return Ok(out);
            }
            let tok = match self.literal(pos)? {
                Some(tok) => tok,
                None => self.word_number_or_op(pos)?,
            };
            out.push(Token { tok, pos });
        }
    }

    /// A quoted literal starting at `pos`, if one does: inline C, the three string forms, a
    /// BLOB.
    fn literal(&mut self, pos: Pos) -> Result<Option<Tok>, VclError> {
        let c = self.peek(0);
        Ok(Some(if self.starts_with("C{") {
            self.bump(2);
            Tok::CCode(self.until("}C", pos, "the inline C block 'C{'")?)
        } else if self.starts_with("{\"") {
            self.bump(2);
            Tok::Str(self.until("\"}", pos, "the long string '{\"'")?)
        } else if self.starts_with("\"\"\"") {
            self.bump(3);
            Tok::Str(self.until("\"\"\"", pos, "the string '\"\"\"'")?)
        } else if c == b'"' {
            self.bump(1);
            let body = self.until("\"", pos, "the string")?;
            if body.contains('\n') {
                return Err(self.error(pos, ONE_LINE_STRING.to_string()));
            }
            Tok::Str(body)
        } else if c == b':' {
            self.bump(1);
            let body = self.until(":", pos, "the BLOB literal ':'")?;
            if let Some(problem) = base64_problem(&body) {
                return Err(self.error(pos, format!("the BLOB literal :{body}: {problem}")));
            }
            Tok::Blob(body)
        } else {
            return Ok(None);
        }))
    }

    /// A word (an identifier, possibly dotted), a number or an operator starting at `pos`.
    fn word_number_or_op(&mut self, pos: Pos) -> Result<Tok, VclError> {
        let c = self.peek(0);
        if c.is_ascii_alphabetic() {
            let start = self.at;
            while matches!(self.peek(0), b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-')
            {
                self.bump(1);
            }
            Ok(Tok::Ident(self.since(start)))
        } else if c.is_ascii_digit() {
            self.number(pos)
        } else if let Some(op) = OPS.iter().find(|op| self.starts_with(op)) {
            self.bump(op.len());
            Ok(Tok::Op(op))
        } else {
            let shown = self.text[self.at..].chars().next().unwrap_or(' ');
            Err(self.error(pos, format!("unexpected character {shown:?}")))
        }
    }

    /// A number, and its unit when a time or size unit follows it directly; any other letter
    /// there is an error (`1k`, `42.42e42`: VCL has no exponents).
    fn number(&mut self, pos: Pos) -> Result<Tok, VclError> {
        let start = self.at;
        while self.peek(0).is_ascii_digit() {
            self.bump(1);
        }
        // Varnish reads `12.` as a REAL, so the fraction's digits are optional.
        if self.peek(0) == b'.' && !self.peek(1).is_ascii_alphabetic() {
            self.bump(1);
            while self.peek(0).is_ascii_digit() {
                self.bump(1);
            }
        }
        let value = self.since(start);
        // The unit is its own word in vcc, so `1 s` is a second too.
        let mut gap = 0;
        while matches!(self.peek(gap), b' ' | b'\t') {
            gap += 1;
        }
        let mut len = 0;
        while self.peek(gap + len).is_ascii_alphanumeric() || self.peek(gap + len) == b'_' {
            len += 1;
        }
        let word = self
            .text
            .get(self.at + gap..self.at + gap + len)
            .unwrap_or_default();
        let first_is_letter = self.peek(gap).is_ascii_alphabetic();
        if first_is_letter && UNITS.iter().any(|u| u.eq_ignore_ascii_case(word)) {
            self.bump(gap + len);
            return Ok(Tok::Quantity(value, word.to_string()));
        }
        if gap == 0 && len > 0 {
            return Err(self.error(
                pos,
                format!(
                    "unknown unit '{word}' after the number {value} (durations take ms, s, m, \
                     h, d, w or y; sizes B, KB, MB, GB or TB)"
                ),
            ));
        }
        Ok(Tok::Number(value))
    }

    /// Skips whitespace and comments (`#`, `//`, `/* */`).
    fn skip_blanks(&mut self) -> Result<(), VclError> {
        loop {
            let c = self.peek(0);
            if c.is_ascii_whitespace() {
                self.bump(1);
            } else if c == b'#' || self.starts_with("//") {
                while self.at < self.src.len() && self.peek(0) != b'\n' {
                    self.bump(1);
                }
            } else if self.starts_with("/*") {
                let pos = self.pos();
                self.bump(2);
                self.until("*/", pos, "the comment '/*'")?;
            } else {
                return Ok(());
            }
        }
    }
}

/// What is wrong with `text` as standard base64 with padding, as vcc checks a BLOB literal.
fn base64_problem(text: &str) -> Option<String> {
    if let Some(bad) = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "+/=".contains(*c)))
    {
        return Some(format!("holds {bad:?}, which is not base64"));
    }
    if !text.len().is_multiple_of(4) {
        return Some(format!(
            "must have a multiple of 4 base64 characters, not {}",
            text.len()
        ));
    }
    let data = text.trim_end_matches('=');
    if data.contains('=') || text.len() - data.len() > 2 {
        return Some("has '=' padding other than one or two at its end".to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        lex("t.vcl", src)
            .expect("lexes")
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    fn q(n: &str, u: &str) -> Tok {
        Tok::Quantity(n.into(), u.into())
    }

    fn id(s: &str) -> Tok {
        Tok::Ident(s.to_string())
    }

    #[test]
    fn names_keep_dots_and_dashes() {
        assert_eq!(
            toks("set req.http.X-Forwarded-For = client.ip;"),
            vec![
                id("set"),
                id("req.http.X-Forwarded-For"),
                Tok::Op("="),
                id("client.ip"),
                Tok::Op(";"),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn three_kinds_of_string() {
        assert_eq!(
            toks("\"a\" {\"b\nc\"} \"\"\"d\"e\"\"\""),
            vec![
                Tok::Str("a".into()),
                Tok::Str("b\nc".into()),
                Tok::Str("d\"e".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn durations_sizes_numbers() {
        assert_eq!(
            toks("120s 1.5m 10ms 1d 1w 1y 3 2.5 10KB 1 s 100000b 1k"),
            vec![
                q("120", "s"),
                q("1.5", "m"),
                q("10", "ms"),
                q("1", "d"),
                q("1", "w"),
                q("1", "y"),
                Tok::Number("3".into()),
                Tok::Number("2.5".into()),
                q("10", "KB"),
                q("1", "s"),
                q("100000", "b"),
                q("1", "k"),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn operators_longest_first() {
        let ops: Vec<Tok> = "== != < > <= >= ~ !~ && || ! + - * / = += -= *= /="
            .split(' ')
            .map(|o| Tok::Op(OPS.iter().copied().find(|x| *x == o).expect("known")))
            .chain([Tok::Eof])
            .collect();
        assert_eq!(
            toks("== != < > <= >= ~ !~ && || ! + - * / = += -= *= /="),
            ops
        );
        assert_eq!(
            toks("a!=b"),
            vec![id("a"), Tok::Op("!="), id("b"), Tok::Eof]
        );
    }

    #[test]
    fn blob_literals_and_trailing_dots() {
        assert_eq!(
            toks(":AQID: 12."),
            vec![
                Tok::Blob("AQID".into()),
                Tok::Number("12.".into()),
                Tok::Eof
            ]
        );
        assert!(lex("t.vcl", ":a b:").is_err());
        assert!(toks(":AQI=: :AA==: ::").len() == 4);
        for bad in [
            ":a:",
            ":bbbbaa:",
            ":aa?:",
            ":aaaa=aa:",
            ":aaaa==a:",
            ":aaaaa=a:",
            ":a===:",
        ] {
            assert!(lex("t.vcl", bad).is_err(), "{bad}");
        }
        let e = lex("t.vcl", "x = 42.42e42;").expect_err("no exponents");
        assert!(
            e.to_string()
                .starts_with("t.vcl:1:5: unknown unit 'e42' after the number 42.42"),
            "{e}"
        );
        assert!(lex("t.vcl", "1mx").is_err());
        assert_eq!(
            toks("1 q"),
            vec![Tok::Number("1".into()), id("q"), Tok::Eof]
        );
    }

    #[test]
    fn comments_are_skipped() {
        assert_eq!(toks("# a\n// b\n/* c\n d */ x"), vec![id("x"), Tok::Eof]);
    }

    #[test]
    fn inline_c_is_one_token() {
        assert_eq!(
            toks("C{ int x = 1; }C sub"),
            vec![Tok::CCode(" int x = 1; ".into()), id("sub"), Tok::Eof]
        );
    }

    #[test]
    fn positions_are_line_and_column() {
        let t = lex("t.vcl", "sub\n  vcl_recv {").expect("lexes");
        assert_eq!((t[1].pos.line, t[1].pos.col), (2, 3));
        assert_eq!((t[2].pos.line, t[2].pos.col), (2, 12));
    }

    #[test]
    fn errors_name_file_line_column() {
        let e = lex("site.vcl", "set x = \"abc\n\";").expect_err("bad");
        assert_eq!(e.to_string().split(": ").next(), Some("site.vcl:1:9"));
        let e = lex("site.vcl", "\n  /* open").expect_err("bad");
        assert_eq!(
            e.to_string(),
            "site.vcl:2:3: the comment '/*' is never closed"
        );
        let e = lex("site.vcl", "a @ b").expect_err("bad");
        assert!(e.to_string().contains("unexpected character '@'"), "{e}");
    }
}
