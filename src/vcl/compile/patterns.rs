//! Regular expressions in VCL: compiled with the match limit, and Varnish's replacement
//! syntax in the regex crate's.

use crate::vcl::pcre::{Pattern, PatternError};

use super::super::ast::Pos;
use super::Checker;

/// Converts a Varnish replacement (`\1` a group, `\0` the match, `\` before any other character
/// that character, a final `\` itself) to the
/// regex crate's (`${1}`, `$$`).
pub(crate) fn replacement(varnish: &str) -> String {
    let mut out = String::with_capacity(varnish.len() + 8);
    let mut chars = varnish.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek() {
                Some(d) if d.is_ascii_digit() => {
                    out.push_str("${");
                    out.push(*d);
                    out.push('}');
                    chars.next();
                }
                // As VRT_regsub: a backslash before anything but a digit stands for that
                // character (`\&` is `&`, `\\` one backslash); a final one for itself.
                Some('$') => {
                    out.push_str("$$");
                    chars.next();
                }
                Some(c) => {
                    out.push(*c);
                    chars.next();
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// Compiles a VCL regular expression (PCRE2 in Varnish): on the regex crate when it can run
/// it, else on the backtracking engine with `[vcl] match_limit` (vcl/pcre.rs).
pub(super) fn compile_regex(c: &mut Checker<'_>, pattern: &str, pos: Pos) -> Option<Pattern> {
    match Pattern::new(pattern, c.options.match_limit) {
        Ok(r) => Some(r),
        Err(PatternError::Unsupported(e)) => {
            c.unsupported(
                pos,
                format!(
                    "Regexp \"{pattern}\": {e} (recursion, branch reset, \\Q...\\E and \
                     callouts are PCRE features Shellac's regular expressions do not have; \
                     docs/vcl.md)"
                ),
            );
            None
        }
        Err(PatternError::Invalid(e)) => {
            c.error(pos, format!("Regexp compilation error: \"{pattern}\": {e}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacements_use_the_regex_crates_syntax() {
        assert_eq!(replacement(r"\1-\0"), "${1}-${0}");
        assert_eq!(replacement("$5 a\\\\b"), "$$5 a\\b");
        assert_eq!(replacement(r"\x\&\$"), "x&$$");
        assert_eq!(replacement(r"a\"), r"a\");
    }
}
