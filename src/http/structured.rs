//! Structured Field Dictionaries (RFC 9651, formerly RFC 8941 §3.2 / §4.2.2), for the targeted
//! cache-control fields of RFC 9213 (`CDN-Cache-Control`).
//!
//! The parser follows the RFC's algorithms exactly, because their error handling is the point:
//! a field that is not a valid Dictionary is ignored whole (RFC 9213 §2.1), and a directive
//! whose value has the wrong type (`max-age="3600"`, `max-age=3600.0`) is not coerced. Values
//! Shellac never reads (byte sequences, inner lists, parameters) are checked for syntax and
//! then dropped.

/// A bare item (RFC 9651 §3.3), as far as cache directives need it.
#[derive(Clone, Debug, PartialEq)]
pub enum Bare {
    Integer(i64),
    /// Kept as thousandths (at most three fractional digits), never as a float.
    Decimal(i64),
    String(String),
    Token(String),
    ByteSequence,
    Boolean(bool),
    Date(i64),
    DisplayString(String),
}

/// A dictionary member's value: an item (its parameters dropped) or an inner list.
#[derive(Clone, Debug, PartialEq)]
pub enum Member {
    Item(Bare),
    InnerList,
}

/// Parses a Dictionary field from its lines, combined with commas (RFC 9651 §4.2). Members in
/// order, a repeated key keeping its last value. `None` on any syntax error.
pub fn parse_dictionary<'a>(
    lines: impl IntoIterator<Item = &'a [u8]>,
) -> Option<Vec<(String, Member)>> {
    let mut input = Vec::new();
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            input.extend_from_slice(b", ");
        }
        input.extend_from_slice(line);
    }
    let mut p = Parser { s: &input, i: 0 };
    p.skip_sp();
    let mut members: Vec<(String, Member)> = Vec::new();
    while !p.done() {
        let key = p.key()?;
        let member = if p.eat(b'=') {
            p.item_or_inner_list()?
        } else {
            p.parameters()?;
            Member::Item(Bare::Boolean(true))
        };
        match members.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = member,
            None => members.push((key, member)),
        }
        p.skip_ows();
        if p.done() {
            break;
        }
        if !p.eat(b',') {
            return None;
        }
        p.skip_ows();
        if p.done() {
            return None; // a trailing comma
        }
    }
    Some(members)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn done(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn skip_sp(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )
    fn key(&mut self) -> Option<String> {
        let start = self.i;
        match self.peek() {
            Some(b'a'..=b'z' | b'*') => self.i += 1,
            _ => return None,
        }
        while matches!(
            self.peek(),
            Some(b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*')
        ) {
            self.i += 1;
        }
        Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn item_or_inner_list(&mut self) -> Option<Member> {
        if self.peek() == Some(b'(') {
            self.inner_list()?;
            return Some(Member::InnerList);
        }
        let bare = self.bare_item()?;
        self.parameters()?;
        Some(Member::Item(bare))
    }

    fn inner_list(&mut self) -> Option<()> {
        self.i += 1; // '('
        loop {
            self.skip_sp();
            if self.eat(b')') {
                return self.parameters();
            }
            self.bare_item()?;
            self.parameters()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return None;
            }
        }
    }

    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip_sp();
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Some(())
    }

    fn bare_item(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string().map(Bare::String),
            b':' => self.byte_sequence(),
            b'?' => self.boolean(),
            b'@' => {
                self.i += 1;
                match self.number()? {
                    Bare::Integer(n) => Some(Bare::Date(n)),
                    _ => None,
                }
            }
            b'%' => self.display_string(),
            b'A'..=b'Z' | b'a'..=b'z' | b'*' => Some(self.token()),
            _ => None,
        }
    }

    /// RFC 9651 §4.2.4: an Integer of at most 15 digits, or a Decimal of at most 12 integer
    /// and 1–3 fractional digits.
    fn number(&mut self) -> Option<Bare> {
        let negative = self.eat(b'-');
        let start = self.i;
        let mut dot = None;
        while let Some(b) = self.peek() {
            match b {
                b'0'..=b'9' => {}
                b'.' if dot.is_none() => {
                    if self.i - start > 12 {
                        return None;
                    }
                    dot = Some(self.i);
                }
                _ => break,
            }
            self.i += 1;
            let len = self.i - start;
            if (dot.is_none() && len > 15) || (dot.is_some() && len > 16) {
                return None;
            }
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        if digits.is_empty() || digits.starts_with('.') {
            return None;
        }
        let sign = if negative { -1 } else { 1 };
        match dot {
            None => Some(Bare::Integer(sign * digits.parse::<i64>().ok()?)),
            Some(at) => {
                let (int, frac) = (&digits[..at - start], &digits[at - start + 1..]);
                if frac.is_empty() || frac.len() > 3 {
                    return None;
                }
                let mut thousandths = int.parse::<i64>().ok()? * 1000;
                let scale = [100, 10, 1];
                for (d, s) in frac.bytes().zip(scale) {
                    thousandths += i64::from(d - b'0') * s;
                }
                Some(Bare::Decimal(sign * thousandths))
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        self.i += 1; // '"'
        let mut out = String::new();
        loop {
            let b = self.peek()?;
            self.i += 1;
            match b {
                b'"' => return Some(out),
                b'\\' => match self.peek()? {
                    c @ (b'"' | b'\\') => {
                        self.i += 1;
                        out.push(c as char);
                    }
                    _ => return None,
                },
                0x20..=0x7e => out.push(b as char),
                _ => return None,
            }
        }
    }

    /// sf-token = ( ALPHA / "*" ) *( tchar / ":" / "/" )
    fn token(&mut self) -> Bare {
        let start = self.i;
        self.i += 1;
        while let Some(b) = self.peek() {
            if is_tchar(b) || b == b':' || b == b'/' {
                self.i += 1;
            } else {
                break;
            }
        }
        Bare::Token(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn byte_sequence(&mut self) -> Option<Bare> {
        self.i += 1; // ':'
        loop {
            match self.peek()? {
                b':' => {
                    self.i += 1;
                    return Some(Bare::ByteSequence);
                }
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' => self.i += 1,
                _ => return None,
            }
        }
    }

    fn boolean(&mut self) -> Option<Bare> {
        self.i += 1; // '?'
        let value = match self.peek()? {
            b'0' => false,
            b'1' => true,
            _ => return None,
        };
        self.i += 1;
        Some(Bare::Boolean(value))
    }

    /// RFC 9651 §4.2.10: `%"` then printable ASCII with `%xx` (lower-case hex) escapes: UTF-8.
    fn display_string(&mut self) -> Option<Bare> {
        self.i += 1; // '%'
        if !self.eat(b'"') {
            return None;
        }
        let mut bytes = Vec::new();
        loop {
            let b = self.peek()?;
            self.i += 1;
            match b {
                b'"' => return String::from_utf8(bytes).ok().map(Bare::DisplayString),
                b'%' => {
                    let hex = |c: u8| match c {
                        b'0'..=b'9' => Some(c - b'0'),
                        b'a'..=b'f' => Some(c - b'a' + 10),
                        _ => None,
                    };
                    let hi = hex(self.peek()?)?;
                    self.i += 1;
                    let lo = hex(self.peek()?)?;
                    self.i += 1;
                    bytes.push(hi << 4 | lo);
                }
                0x20..=0x7e => bytes.push(b),
                _ => return None,
            }
        }
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(text: &str) -> Option<Vec<(String, Member)>> {
        parse_dictionary([text.as_bytes()])
    }

    fn item(text: &str, key: &str) -> Option<Bare> {
        dict(text)?.into_iter().find_map(|(k, m)| match m {
            Member::Item(b) if k == key => Some(b),
            _ => None,
        })
    }

    #[test]
    fn members_and_types() {
        let d = dict("max-age=60, no-store, private=\"x-a, x-b\", t=tok/1:2, d=1.5, b=?0").unwrap();
        assert_eq!(
            d,
            vec![
                ("max-age".into(), Member::Item(Bare::Integer(60))),
                ("no-store".into(), Member::Item(Bare::Boolean(true))),
                (
                    "private".into(),
                    Member::Item(Bare::String("x-a, x-b".into()))
                ),
                ("t".into(), Member::Item(Bare::Token("tok/1:2".into()))),
                ("d".into(), Member::Item(Bare::Decimal(1500))),
                ("b".into(), Member::Item(Bare::Boolean(false))),
            ]
        );
        assert_eq!(item("a=-7", "a"), Some(Bare::Integer(-7)));
        assert_eq!(item("a=3600.0", "a"), Some(Bare::Decimal(3_600_000)));
        assert_eq!(item("a=\"3600\"", "a"), Some(Bare::String("3600".into())));
        assert_eq!(item("a=:aGVsbG8=:", "a"), Some(Bare::ByteSequence));
        assert_eq!(item("a=@1659578233", "a"), Some(Bare::Date(1_659_578_233)));
        assert_eq!(
            item("a=%\"f%c3%bc\"", "a"),
            Some(Bare::DisplayString("fü".into()))
        );
        assert_eq!(
            item("a=\"q\\\"b\\\\\"", "a"),
            Some(Bare::String("q\"b\\".into()))
        );
    }

    #[test]
    fn parameters_inner_lists_lines_and_duplicates() {
        assert_eq!(
            item("max-age=60;a=1;b, x", "max-age"),
            Some(Bare::Integer(60))
        );
        assert_eq!(
            item("no-store;x=\"y\"", "no-store"),
            Some(Bare::Boolean(true))
        );
        let d = dict("l=(a \"b\" 1);p, z").unwrap();
        assert_eq!(d[0], ("l".into(), Member::InnerList));
        assert_eq!(
            item("max-age=1, max-age=2", "max-age"),
            Some(Bare::Integer(2))
        );
        let two = parse_dictionary([&b"max-age=60"[..], &b"no-store"[..]]).unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(dict("  a=1 ,\tb=2  ").unwrap().len(), 2);
        assert_eq!(dict("").unwrap(), vec![]);
    }

    #[test]
    fn syntax_errors() {
        for bad in [
            "Max-Age=60",
            "max-age=60,",
            "max-age=60,,no-store",
            "max-age=",
            "max-age=60 no-store",
            "a=1234567890123456",
            "a=1234567890123.5",
            "a=1.2345",
            "a=1.",
            "a=\"unterminated",
            "a=\"bad\\escape\"",
            "a=?2",
            "a=:not base64!:",
            "a=(1 2",
            "a=(1,2)",
            "a=@1.5",
            "a=%\"%C3\"",
            "a=#",
            "\tmax-age=60",
            "max-age=60;",
            "a=1;B=2",
        ] {
            assert_eq!(dict(bad), None, "{bad:?}");
        }
        assert_eq!(parse_dictionary([&b"max-age=60\xff"[..]]), None);
    }
}
