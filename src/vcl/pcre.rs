//! VCL's regular expressions: PCRE2's syntax as Varnish reads it, run by the `regex` crate
//! when it can (linear time, no limit needed) and by `fancy-regex`'s backtracking engine for
//! what only backtracking can do (look-ahead, look-behind, back-references, atomic groups),
//! with a bound on backtracking as Varnish's `pcre2_match_limit`: a pathological pattern
//! fails its match (counted), never the request or the process.

use std::borrow::Cow;

/// Varnish's `pcre2_match_limit` default: at most this many backtracking steps per match.
pub const DEFAULT_MATCH_LIMIT: usize = 10_000;

/// A compiled VCL regular expression.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// Run by the `regex` crate: no backtracking, so no limit.
    Linear(regex::Regex),
    /// Run by the backtracking engine with a limit.
    Backtracking(Box<fancy_regex::Regex>),
}

/// A match that took more than the limit's backtracking steps: counted as a failed match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitHit;

/// Why a pattern does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// Wrong in PCRE too: the engine's words.
    Invalid(String),
    /// Valid PCRE that neither engine runs (recursion, branch reset, `\Q...\E`, ...).
    Unsupported(String),
}

/// PCRE constructs neither engine has.
const PCRE_ONLY: [&str; 9] = [
    "\\Q", "(?|", "(?R", "(?&", "(?P>", "\\g<", "(*", "(?C", "\\X",
];

impl Pattern {
    /// Compiles `pcre` (PCRE2 syntax); the backtracking engine stops a match after `limit`
    /// backtracking steps.
    pub fn new(pcre: &str, limit: usize) -> Result<Pattern, PatternError> {
        let translated = translate(pcre);
        let linear_error = match regex::Regex::new(&translated) {
            Ok(r) => return Ok(Pattern::Linear(r)),
            Err(e) => e.to_string(),
        };
        let backtracking = fancy_regex::RegexBuilder::new(&translated)
            .backtrack_limit(limit.max(1))
            .build();
        match backtracking {
            Ok(r) => Ok(Pattern::Backtracking(Box::new(r))),
            Err(e) => {
                let last = |text: &str| text.lines().last().unwrap_or(text).trim().to_string();
                if PCRE_ONLY.iter().any(|p| pcre.contains(p)) {
                    Err(PatternError::Unsupported(last(&e.to_string())))
                } else {
                    Err(PatternError::Invalid(last(&linear_error)))
                }
            }
        }
    }

    /// Whether it matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> Result<bool, LimitHit> {
        match self {
            Pattern::Linear(r) => Ok(r.is_match(text)),
            Pattern::Backtracking(r) => r.is_match(text).map_err(|_| LimitHit),
        }
    }

    /// `text` with the first match (every match with `all`) replaced by `with`, in the regex
    /// crate's replacement syntax (`${1}`, `$$`).
    pub fn replace<'t>(
        &self,
        text: &'t str,
        with: &str,
        all: bool,
    ) -> Result<Cow<'t, str>, LimitHit> {
        let limit = if all { 0 } else { 1 };
        match self {
            Pattern::Linear(r) => Ok(r.replacen(text, limit, with)),
            Pattern::Backtracking(r) => r.try_replacen(text, limit, with).map_err(|_| LimitHit),
        }
    }

    /// The pattern as compiled (after [`translate`]).
    pub fn as_str(&self) -> &str {
        match self {
            Pattern::Linear(r) => r.as_str(),
            Pattern::Backtracking(r) => r.as_str(),
        }
    }

    /// Whether it runs on the backtracking engine.
    pub fn backtracks(&self) -> bool {
        matches!(self, Pattern::Backtracking(_))
    }
}

/// PCRE's character classes in the regex crates' syntax: inside `[...]` a `[` is a literal
/// unless it opens a POSIX class (`[[:alpha:]]`), and `&&`, `--`, `~~` are literals (the
/// regex crates read nested classes and set operations there). Everything else is the same
/// in both syntaxes and is left as written.
pub fn translate(pcre: &str) -> Cow<'_, str> {
    if !pcre.contains('[') {
        return Cow::Borrowed(pcre);
    }
    let b: Vec<char> = pcre.chars().collect();
    let mut out = String::with_capacity(pcre.len() + 4);
    let mut i = 0;
    let mut in_class = false;
    // `\Q...\E` quotes everything: copied as written.
    let mut quoted = false;
    while i < b.len() {
        let c = b[i];
        if quoted {
            out.push(c);
            if c == '\\' && b.get(i + 1) == Some(&'E') {
                out.push('E');
                i += 1;
                quoted = false;
            }
            i += 1;
            continue;
        }
        if c == '\\' {
            out.push(c);
            if let Some(&n) = b.get(i + 1) {
                out.push(n);
                quoted = n == 'Q';
            }
            i += 2;
            continue;
        }
        if !in_class {
            out.push(c);
            if c == '[' {
                in_class = true;
                // A `^` and then a `]` right after the opening are literals of the class.
                if b.get(i + 1) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if b.get(i + 1) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        match c {
            ']' => {
                in_class = false;
                out.push(']');
            }
            '[' if b.get(i + 1) == Some(&':') => {
                // A POSIX class: copied through its `:]`.
                let rest: String = b[i..].iter().collect();
                match rest.find(":]") {
                    Some(end) => {
                        out.push_str(&rest[..end + 2]);
                        i += rest[..end + 2].chars().count();
                        continue;
                    }
                    None => out.push_str("\\["),
                }
            }
            '[' => out.push_str("\\["),
            '&' | '~' | '-' if b.get(i + 1) == Some(&c) => {
                out.push('\\');
                out.push(c);
                out.push('\\');
                out.push(c);
                i += 1;
            }
            c => out.push(c),
        }
        i += 1;
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(p: &str) -> Pattern {
        Pattern::new(p, DEFAULT_MATCH_LIMIT).unwrap_or_else(|e| panic!("{p}: {e:?}"))
    }

    #[test]
    fn a_literal_bracket_in_a_class() {
        assert_eq!(translate("^/[[3-9]x"), "^/[\\[3-9]x");
        let p = compile("^/[[3-9]x");
        assert!(!p.backtracks());
        assert!(p.is_match("/[x").unwrap() && p.is_match("/5x").unwrap());
        assert!(!p.is_match("/1x").unwrap());
        // POSIX classes, a leading `]`, set-operation lookalikes and escapes stay PCRE's.
        assert!(compile("[[:digit:]]+").is_match("42").unwrap());
        assert!(compile("[]a]").is_match("]").unwrap());
        assert!(compile("[^]a]").is_match("b").unwrap());
        assert!(compile("[a&&b]").is_match("&").unwrap());
        assert!(compile("[\\[]").is_match("[").unwrap());
        assert_eq!(translate("\\Q[[\\E[a]"), "\\Q[[\\E[a]");
    }

    #[test]
    fn look_around_and_back_references_backtrack() {
        let p = compile("^/(?!admin)[a-z]+$");
        assert!(p.backtracks());
        assert!(p.is_match("/shop").unwrap());
        assert!(!p.is_match("/admin").unwrap());
        let p = compile("(?<=\\.)(jpg|png)$");
        assert!(p.is_match("a.png").unwrap() && !p.is_match("apng").unwrap());
        let p = compile("^(\\w+)-\\1$");
        assert!(p.is_match("ab-ab").unwrap() && !p.is_match("ab-cd").unwrap());
        assert_eq!(
            compile("(\\w+)=(?=x)")
                .replace("a=x b=y", "${1}:", true)
                .unwrap(),
            "a:x b=y"
        );
    }

    #[test]
    fn a_pathological_pattern_fails_its_match_within_the_limit() {
        // Catastrophic backtracking inside a look-ahead's loop: 2^n paths on a miss.
        let p = Pattern::new("^((?=a)a+)+$", 1_000).unwrap();
        assert!(p.backtracks());
        let text = format!("{}!", "a".repeat(40));
        assert_eq!(p.is_match(&text), Err(LimitHit));
        assert_eq!(p.replace(&text, "x", true), Err(LimitHit));
    }

    #[test]
    fn errors_say_which_kind() {
        assert!(matches!(
            Pattern::new("a(b", 10),
            Err(PatternError::Invalid(_))
        ));
        assert!(matches!(
            Pattern::new("(?|(a)|(b))", 10),
            Err(PatternError::Unsupported(_))
        ));
    }
}
