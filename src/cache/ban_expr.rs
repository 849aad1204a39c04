//! A ban expression read as Varnish reads it (`VRT_ban_string`, `BAN_AddTest`): words split
//! at blanks (a `"quoted"` word may hold blanks), `FIELD OP ARG` conditions joined by `&&`,
//! and Varnish's words for every refusal (`Expected comparison operator.`, `Unknown or
//! unsupported field "foo"`, ...), so an operator's `ban()` fails with the message Varnish
//! gives. Fields: `req.url`, `req.http.NAME`, `obj.status` (compared as text, as Varnish
//! does: `obj.status != x` is a valid ban, trunk c00100), `obj.http.NAME`, and the
//! durations `obj.ttl` (freshness left), `obj.age`, `obj.grace`, `obj.keep`; Shellac also takes
//! `req.host` for `req.http.host`.

/// What a condition reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Url,
    /// `req.http.NAME`.
    ReqHeader(http::HeaderName),
    Status,
    /// `obj.http.NAME`.
    ObjHeader(http::HeaderName),
    Ttl,
    Age,
    Grace,
    Keep,
}

impl Subject {
    /// Whether it compares numbers (`==, !=, >, >=, < or <=`) rather than text.
    fn numeric(&self) -> bool {
        matches!(
            self,
            Subject::Ttl | Subject::Age | Subject::Grace | Subject::Keep
        )
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oper {
    Eq,
    Ne,
    Match,
    NotMatch,
    Gt,
    Ge,
    Lt,
    Le,
}

/// One `FIELD OP ARG`.
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    pub subject: Subject,
    pub oper: Oper,
    /// The argument as written (a regex, a text, a number or a duration).
    pub arg: String,
    /// A duration's seconds, for the numeric subjects.
    pub number: f64,
}

/// The conditions of `expr`, or Varnish's words for what is wrong with it.
pub fn parse(expr: &str) -> Result<Vec<Test>, String> {
    let words = split(expr)?;
    let mut words = words.iter().map(String::as_str);
    let mut tests = Vec::new();
    loop {
        let Some(field) = words.next() else {
            return Err("No ban conditions found.".into());
        };
        let Some(oper) = words.next() else {
            return Err("Expected comparison operator.".into());
        };
        let Some(arg) = words.next() else {
            return Err("Expected second operand.".into());
        };
        tests.push(test(field, oper, arg)?);
        match words.next() {
            None => return Ok(tests),
            Some("&&") => {}
            Some(other) => {
                return Err(format!("Expected && between conditions, found \"{other}\""));
            }
        }
    }
}

/// Varnish's `VAV_Parse` without escapes: words at blanks, a `"` word runs to the next `"`.
fn split(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').ok_or("Missing '\"'")?;
            out.push(quoted[..end].to_string());
            rest = &quoted[end + 1..];
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
        rest = rest.trim_start();
    }
    Ok(out)
}

fn test(field: &str, oper: &str, arg: &str) -> Result<Test, String> {
    let subject = match field {
        "req.url" => Subject::Url,
        "req.host" => Subject::ReqHeader(http::header::HOST),
        "obj.status" => Subject::Status,
        "obj.ttl" => Subject::Ttl,
        "obj.age" => Subject::Age,
        "obj.grace" => Subject::Grace,
        "obj.keep" => Subject::Keep,
        f => match (
            f.strip_prefix("req.http.").and_then(header_name),
            f.strip_prefix("obj.http.").and_then(header_name),
        ) {
            (Some(n), _) => Subject::ReqHeader(n),
            (_, Some(n)) => Subject::ObjHeader(n),
            _ => return Err(format!("Unknown or unsupported field \"{f}\"")),
        },
    };
    let oper = match (oper, subject.numeric()) {
        ("==", _) => Oper::Eq,
        ("!=", _) => Oper::Ne,
        ("~", false) => Oper::Match,
        ("!~", false) => Oper::NotMatch,
        (">", true) => Oper::Gt,
        (">=", true) => Oper::Ge,
        ("<", true) => Oper::Lt,
        ("<=", true) => Oper::Le,
        (o, true) => {
            return Err(format!(
                "expected conditional (==, !=, >, >=, < or <=) got \"{o}\""
            ));
        }
        (o, false) => {
            return Err(format!(
                "expected conditional (==, !=, ~ or !~) got \"{o}\""
            ));
        }
    };
    let number = match subject {
        Subject::Ttl | Subject::Age | Subject::Grace | Subject::Keep => duration(arg)
            .ok_or_else(|| format!("expected duration <n.nn>[ms|s|m|h|d|w|y] got \"{arg}\""))?,
        _ => 0.0,
    };
    if matches!(oper, Oper::Match | Oper::NotMatch)
        && let Err(e) = regex::Regex::new(arg)
    {
        return Err(format!("Regex compile error: {e}"));
    }
    Ok(Test {
        subject,
        oper,
        arg: arg.to_string(),
        number,
    })
}

/// A field name of RFC 9110's token characters.
fn header_name(n: &str) -> Option<http::HeaderName> {
    http::HeaderName::from_bytes(n.as_bytes()).ok()
}

/// Varnish's `VNUM_duration`: a number and its unit (`ms`, `s`, `m`, `h`, `d`, `w`, `y`),
/// in seconds.
fn duration(s: &str) -> Option<f64> {
    let at = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .filter(|&n| n > 0)?;
    let (n, unit) = s.split_at(at);
    let n: f64 = n.parse().ok()?;
    let scale = match unit.trim_start() {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 7.0 * 86400.0,
        "y" => 365.0 * 86400.0,
        _ => return None,
    };
    n.is_finite().then_some(n * scale)
}

impl Test {
    /// Whether the condition holds: `text` for the text subjects (`None`: the field is
    /// absent), `number` for the numeric ones (a status, or seconds).
    pub fn holds(&self, text: Option<&str>, number: f64, regex: Option<&regex::Regex>) -> bool {
        match self.oper {
            Oper::Match => text.is_some_and(|t| regex.is_some_and(|r| r.is_match(t))),
            Oper::NotMatch => text.is_none_or(|t| regex.is_some_and(|r| !r.is_match(t))),
            Oper::Eq if !self.subject.numeric() => text == Some(self.arg.as_str()),
            Oper::Ne if !self.subject.numeric() => text != Some(self.arg.as_str()),
            Oper::Eq => number == self.number,
            Oper::Ne => number != self.number,
            Oper::Gt => number > self.number,
            Oper::Ge => number >= self.number,
            Oper::Lt => number < self.number,
            Oper::Le => number <= self.number,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Varnish's v00009 / v00011: every refusal in Varnish's words.
    #[test]
    fn varnish_v00011_refusals_in_varnishs_words() {
        for (expr, words) in [
            ("", "No ban conditions found."),
            ("req.url", "Expected comparison operator."),
            ("req.url //", "Expected second operand."),
            (
                "req.url // bar",
                "expected conditional (==, !=, ~ or !~) got \"//\"",
            ),
            (
                "req.url == bar //",
                "Expected && between conditions, found \"//\"",
            ),
            ("foo == bar //", "Unknown or unsupported field \"foo\""),
            (
                "obj.age == 4",
                "expected duration <n.nn>[ms|s|m|h|d|w|y] got \"4\"",
            ),
            (
                "obj.age // 4d",
                "expected conditional (==, !=, >, >=, < or <=) got \"//\"",
            ),
            (
                "obj.http.foo > 4d",
                "expected conditional (==, !=, ~ or !~) got \">\"",
            ),
        ] {
            assert_eq!(parse(expr).map(|_| ()), Err(words.to_string()), "{expr}");
        }
        let ok = parse("req.url ~ ^/$").unwrap();
        assert_eq!(ok[0].subject, Subject::Url);
        assert_eq!(ok[0].oper, Oper::Match);
    }

    #[test]
    fn conditions_quotes_and_durations() {
        let t = parse("obj.http.X-Tag == \"a b\" && obj.ttl > 1.5m && obj.status != x").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(
            t[0].subject,
            Subject::ObjHeader(http::HeaderName::from_static("x-tag"))
        );
        assert_eq!(t[0].arg, "a b");
        assert_eq!(
            (t[1].subject.clone(), t[1].oper, t[1].number),
            (Subject::Ttl, Oper::Gt, 90.0)
        );
        assert_eq!(
            (t[2].subject.clone(), t[2].arg.as_str()),
            (Subject::Status, "x")
        );
        assert!(t[2].holds(Some("200"), 0.0, None));
        assert!(t[1].holds(None, 91.0, None));
        assert!(!t[1].holds(None, 90.0, None));
        assert!(parse("req.url == a && ").is_err());
        assert_eq!(duration("10ms"), Some(0.01));
        assert_eq!(duration("4"), None);
        assert_eq!(duration("d"), None);
    }
}
