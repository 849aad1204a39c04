//! `expect LHS OP RHS`: varnishtest's comparison (`vtc_expect`). Missing values are
//! `<undef>`; `==`/`!=` compare strings, `~`/`!~` match a regular expression, `<` `>` `<=`
//! `>=` compare numbers and are false when either side is missing. Varnish 2.1's harness knew
//! only `==` and `!=`, and a name it could not resolve stood for itself.

use regex::Regex;

use super::context::{Flavour, Step, fail, skip};

/// Checks `lhs op rhs`; `olhs`/`orhs` are the words as written (for the message).
pub fn check(
    flavour: Flavour,
    olhs: &str,
    lhs: Option<&str>,
    op: &str,
    orhs: &str,
    rhs: Option<&str>,
) -> Step<String> {
    let undef = lhs.is_none() || rhs.is_none();
    let (l, r) = match flavour {
        Flavour::Trunk => (lhs.unwrap_or("<undef>"), rhs.unwrap_or("<undef>")),
        Flavour::Legacy => (lhs.unwrap_or(olhs), rhs.unwrap_or(orhs)),
    };
    let ok = match op {
        "==" => l == r,
        "!=" => l != r,
        "~" | "!~" if flavour == Flavour::Trunk => {
            let re = regex(r)?;
            re.is_match(l) == (op == "~")
        }
        "<" | ">" | "<=" | ">=" if flavour == Flavour::Trunk => {
            if undef {
                false
            } else {
                let (a, b) = (vnum(l), vnum(r));
                match op {
                    "<" => a < b,
                    ">" => a > b,
                    "<=" => a <= b,
                    _ => a >= b,
                }
            }
        }
        _ => return fail(format!("Bad test operator: {op}")),
    };
    let text = format!("EXPECT {olhs} ({l}) {op} \"{r}\"");
    if ok {
        Ok(format!("{text} match"))
    } else {
        fail(format!("{text} failed"))
    }
}

/// A regular expression as Varnish writes them (PCRE). One Rust's engine cannot compile
/// (look-around, back-references) makes the file skipped: the runner, not Shellac, lacks it.
pub fn regex(re: &str) -> Step<Regex> {
    let quoted = pcre_quotes(re);
    match Regex::new(&quoted) {
        Ok(r) => Ok(r),
        Err(e) => {
            let msg = e.to_string();
            if msg.contains("look-around") || msg.contains("backreferences") {
                skip(format!(
                    "regular expression {re:?} needs PCRE features the runner lacks"
                ))
            } else {
                fail(format!("REGEXP error: {msg} ({re})"))
            }
        }
    }
}

/// PCRE's literal quoting, `\\Q...\\E` (to the end when no `\\E` follows), written as Rust's
/// engine reads it: the quoted text escaped.
fn pcre_quotes(re: &str) -> std::borrow::Cow<'_, str> {
    if !re.contains("\\Q") {
        return std::borrow::Cow::Borrowed(re);
    }
    let mut out = String::new();
    let mut rest = re;
    while let Some(i) = rest.find("\\Q") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let (quoted, next) = match after.find("\\E") {
            Some(j) => (&after[..j], &after[j + 2..]),
            None => (after, ""),
        };
        out.push_str(&regex::escape(quoted));
        rest = next;
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// A number as Varnish's VNUM reads it: decimal, optional fraction and exponent, blanks
/// around; anything else is NaN (every comparison with it is false).
pub fn vnum(s: &str) -> f64 {
    let t = s.trim();
    if t.is_empty()
        || !t
            .bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return f64::NAN;
    }
    t.parse().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(l: Option<&str>, op: &str, r: Option<&str>) -> bool {
        check(Flavour::Trunk, "l", l, op, "r", r).is_ok()
    }

    #[test]
    fn trunk_comparisons() {
        assert!(t(Some("200"), "==", Some("200")));
        assert!(t(None, "==", Some("<undef>")));
        assert!(t(Some("a"), "!=", None));
        assert!(t(Some("abc"), "~", Some("^a.c$")));
        assert!(t(Some("abc"), "!~", Some("x")));
        assert!(t(Some("10"), ">", Some("9")));
        assert!(t(Some("1.5"), "<=", Some("1.5")));
        assert!(!t(None, "<", Some("1")));
        assert!(!t(Some("x"), "<", Some("1")));
        assert!(check(Flavour::Trunk, "a", Some("1"), "=~", "b", Some("1")).is_err());
    }

    #[test]
    fn legacy_names_stand_for_themselves() {
        assert!(
            check(
                Flavour::Legacy,
                "resp.http.x",
                None,
                "!=",
                "foo",
                Some("foo")
            )
            .is_ok()
        );
        assert!(check(Flavour::Legacy, "a", Some("1"), "<", "b", Some("2")).is_err());
    }

    #[test]
    fn pcre_only_regexes_skip() {
        assert!(matches!(
            regex("a(?=b)"),
            Err(crate::vtc::context::Halt::Skip(_))
        ));
    }

    /// trunk/o00006's `{\Qinsufficient workspace (proto_priv)\E}`: PCRE's quoting compiles
    /// and matches the text literally, parentheses included.
    #[test]
    fn pcre_literal_quoting() {
        let r = regex(r"\Qinsufficient workspace (proto_priv)\E").unwrap();
        assert!(r.is_match("insufficient workspace (proto_priv)"));
        assert!(!r.is_match("insufficient workspace proto_priv"));
        let r = regex(r"^a\Q.*\E$").unwrap();
        assert!(r.is_match("a.*") && !r.is_match("abc"));
        assert!(regex(r"x\Q[").unwrap().is_match("x["));
        assert_eq!(pcre_quotes("plain"), "plain");
    }
}
