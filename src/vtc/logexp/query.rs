//! `-q QUERY`: which groups a `logexpect` sees, as vsl-query(7) selects them — the subset the
//! scripts use: `TAG` (a record with that tag), `TAG[:FIELD] OP VALUE` with `~ !~` (regex),
//! `eq ne` (string), `== != < > <= >=` (number), `vxid OP N`, joined by `and` / `or` /
//! `not` and parentheses. A group matches when some record satisfies each test.

use regex::Regex;

use super::Record;
use crate::vtc::context::{Halt, Step, fail};

#[derive(Debug)]
pub enum Query {
    And(Box<Query>, Box<Query>),
    Or(Box<Query>, Box<Query>),
    Not(Box<Query>),
    Test(Test),
}

#[derive(Debug)]
pub struct Test {
    tag: String,
    /// `TAG:FIELD`: a header record's field name (its value is then tested).
    field: Option<String>,
    op: Option<(String, Operand)>,
}

#[derive(Debug)]
enum Operand {
    Re(Regex),
    Text(String),
    Number(f64),
}

impl Query {
    pub fn parse(text: &str) -> Step<Query> {
        let tokens = tokenize(text)?;
        let mut p = Parser { tokens, at: 0 };
        let q = p.or()?;
        if p.at != p.tokens.len() {
            return fail(format!("-q {text:?}: unexpected {:?}", p.tokens[p.at]));
        }
        Ok(q)
    }

    /// Whether the group's records satisfy the query.
    pub fn matches(&self, group: &[Record]) -> bool {
        match self {
            Query::And(a, b) => a.matches(group) && b.matches(group),
            Query::Or(a, b) => a.matches(group) || b.matches(group),
            Query::Not(a) => !a.matches(group),
            Query::Test(t) => group.iter().any(|r| t.holds(r)),
        }
    }
}

impl Test {
    fn holds(&self, r: &Record) -> bool {
        let value = if self.tag == "vxid" {
            r.vxid.to_string()
        } else {
            if !self.tag.eq_ignore_ascii_case(&r.tag) {
                return false;
            }
            match &self.field {
                Some(f) => match r.data.split_once(':') {
                    Some((name, v)) if name.trim().eq_ignore_ascii_case(f) => v.trim().to_string(),
                    _ => return false,
                },
                None => r.data.clone(),
            }
        };
        let Some((op, operand)) = &self.op else {
            return true;
        };
        match (op.as_str(), operand) {
            ("~", Operand::Re(re)) => re.is_match(&value),
            ("!~", Operand::Re(re)) => !re.is_match(&value),
            ("eq", Operand::Text(t)) => value == *t,
            ("ne", Operand::Text(t)) => value != *t,
            (op, Operand::Number(n)) => {
                let Some(v) = value
                    .split_whitespace()
                    .next()
                    .and_then(|w| w.parse::<f64>().ok())
                else {
                    return false;
                };
                match op {
                    "==" => v == *n,
                    "!=" => v != *n,
                    "<" => v < *n,
                    ">" => v > *n,
                    "<=" => v <= *n,
                    ">=" => v >= *n,
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

fn tokenize(text: &str) -> Step<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' || c == '\'' {
            chars.next();
            let mut s = String::from("\u{1}");
            loop {
                match chars.next() {
                    Some(q) if q == c => break,
                    Some('\\') => match chars.next() {
                        Some(e) if e == c => s.push(e),
                        Some(e) => {
                            s.push('\\');
                            s.push(e);
                        }
                        None => break,
                    },
                    Some(o) => s.push(o),
                    None => return fail(format!("-q {text:?}: unterminated string")),
                }
            }
            out.push(s);
        } else if c == '(' || c == ')' {
            chars.next();
            out.push(c.to_string());
        } else {
            let mut s = String::new();
            while let Some(&d) = chars.peek() {
                if d.is_whitespace() || d == '(' || d == ')' {
                    break;
                }
                s.push(d);
                chars.next();
            }
            out.push(s);
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<String>,
    at: usize,
}

const OPS: [&str; 10] = ["~", "!~", "eq", "ne", "==", "!=", "<", ">", "<=", ">="];

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn or(&mut self) -> Step<Query> {
        let mut q = self.and()?;
        while self.peek() == Some("or") {
            self.at += 1;
            q = Query::Or(Box::new(q), Box::new(self.and()?));
        }
        Ok(q)
    }

    fn and(&mut self) -> Step<Query> {
        let mut q = self.unary()?;
        while self.peek() == Some("and") {
            self.at += 1;
            q = Query::And(Box::new(q), Box::new(self.unary()?));
        }
        Ok(q)
    }

    fn unary(&mut self) -> Step<Query> {
        match self.peek() {
            Some("not") => {
                self.at += 1;
                Ok(Query::Not(Box::new(self.unary()?)))
            }
            Some("(") => {
                self.at += 1;
                let q = self.or()?;
                if self.peek() != Some(")") {
                    return fail("-q: missing ')'");
                }
                self.at += 1;
                Ok(q)
            }
            Some(_) => self.test(),
            None => fail("-q: a test is missing"),
        }
    }

    fn test(&mut self) -> Step<Query> {
        let lhs = self.tokens[self.at].clone();
        self.at += 1;
        if lhs.starts_with('{') || lhs.contains('[') {
            return Err(Halt::Skip(format!(
                "-q with record prefixes or field indexes ({lhs})"
            )));
        }
        let (tag, field) = match lhs.split_once(':') {
            Some((t, f)) => (t.to_string(), Some(f.to_string())),
            None => (lhs, None),
        };
        let op = match self.peek() {
            Some(o) if OPS.contains(&o) => {
                let op = o.to_string();
                self.at += 1;
                let Some(raw) = self.tokens.get(self.at).cloned() else {
                    return fail(format!("-q: {tag} {op} needs a value"));
                };
                self.at += 1;
                let raw = raw.trim_start_matches('\u{1}').to_string();
                let operand = match op.as_str() {
                    "~" | "!~" => Operand::Re(crate::vtc::expect::regex(&raw)?),
                    "eq" | "ne" => Operand::Text(raw),
                    _ => Operand::Number(
                        raw.parse()
                            .map_err(|_| Halt::Fail(format!("-q: {raw:?} is not a number")))?,
                    ),
                };
                Some((op, operand))
            }
            _ => None,
        };
        Ok(Query::Test(Test { tag, field, op }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(vxid: u64, tag: &str, data: &str) -> Record {
        Record {
            seq: 1,
            vxid,
            side: 'c',
            tag: tag.into(),
            data: data.into(),
        }
    }

    #[test]
    fn the_queries_of_the_scripts() {
        let g = [
            rec(1001, "Begin", "req 0 rxreq"),
            rec(1001, "ReqURL", "/"),
            rec(1002, "BerespHeader", "Content-Length: 1025"),
        ];
        assert!(Query::parse("vxid == 1001").unwrap().matches(&g));
        assert!(!Query::parse("vxid == 1003").unwrap().matches(&g));
        assert!(Query::parse("ReqURL ~ \"^/$\"").unwrap().matches(&g));
        assert!(!Query::parse("Begin ~ bereq").unwrap().matches(&g));
        assert!(
            Query::parse("BerespHeader:Content-Length eq 1025")
                .unwrap()
                .matches(&g)
        );
        assert!(Query::parse("Begin and not Debug").unwrap().matches(&g));
        assert!(
            Query::parse("Debug or (ReqURL ~ '^/')")
                .unwrap()
                .matches(&g)
        );
    }
}
