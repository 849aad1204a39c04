//! Virtual-host names matched with nginx's precedence exactly (issue 31): an exact name, then
//! the longest leading wildcard (`*.example.org`), then the longest trailing wildcard
//! (`mail.*`), then the first regular expression in file order; `.example.org` is both
//! `example.org` and `*.example.org`. Names are compared without letter case and without a
//! trailing dot. What a site does when nothing matches (the listen address's default site, or
//! 421) is the caller's business: [`Names::find`] returns `None`.

use std::collections::HashMap;

/// One `server_name` entry as written in a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// `www.example.org`
    Exact(String),
    /// `*.example.org` — the suffix after `*`, e.g. `.example.org`.
    Leading(String),
    /// `mail.*` — the prefix before `*`, e.g. `mail.`.
    Trailing(String),
    /// `~^www\d+\.example\.org$`
    Regex(String),
}

/// Why a `server_name` entry is refused (`shellac check` names the site's file:line:key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("an empty server name")]
    Empty,
    #[error(
        "\"{0}\": a wildcard is allowed only as the whole first label (\"*.example.org\") or the whole last one (\"mail.*\"); use a regular expression (\"~...\") for anything else"
    )]
    Wildcard(String),
    #[error("\"{0}\": the regular expression does not compile: {1}")]
    Regex(String, String),
    #[error("\"{0}\": {1}")]
    NotAName(String, &'static str),
}

impl Pattern {
    /// Reads a `server_name` entry: `~` starts a regular expression, `*.` / `.*` a wildcard,
    /// a leading `.` both the name and its subdomains (two patterns).
    pub fn parse(written: &str) -> Result<Vec<Pattern>, PatternError> {
        let w = written.trim();
        if w.is_empty() {
            return Err(PatternError::Empty);
        }
        if let Some(re) = w.strip_prefix('~') {
            compile(re).map_err(|e| PatternError::Regex(w.to_owned(), e.to_string()))?;
            return Ok(vec![Pattern::Regex(re.to_owned())]);
        }
        let name = normalise(w);
        if let Some(why) = not_a_name(&name) {
            return Err(PatternError::NotAName(w.to_owned(), why));
        }
        if let Some(rest) = name.strip_prefix("*.") {
            if rest.contains('*') || rest.is_empty() {
                return Err(PatternError::Wildcard(w.to_owned()));
            }
            return Ok(vec![Pattern::Leading(format!(".{rest}"))]);
        }
        if let Some(rest) = name.strip_suffix(".*") {
            if rest.contains('*') || rest.is_empty() {
                return Err(PatternError::Wildcard(w.to_owned()));
            }
            return Ok(vec![Pattern::Trailing(format!("{rest}."))]);
        }
        if name.contains('*') {
            return Err(PatternError::Wildcard(w.to_owned()));
        }
        if let Some(rest) = name.strip_prefix('.') {
            if rest.is_empty() {
                return Err(PatternError::Empty);
            }
            return Ok(vec![
                Pattern::Exact(rest.to_owned()),
                Pattern::Leading(name.clone()),
            ]);
        }
        Ok(vec![Pattern::Exact(name)])
    }
}

/// Why `name` (lower case, not a regular expression) can never equal a request's host, as
/// hosts are compared without their port: `None` when it can. Letters, digits, `-`, `_` and
/// `.` (and `*` for the wildcard checks), or an IPv6 literal in brackets.
fn not_a_name(name: &str) -> Option<&'static str> {
    if name.starts_with('[') && name.ends_with(']') {
        let inside = &name[1..name.len() - 1];
        return (inside.is_empty()
            || !inside
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.'))
        .then_some("an IPv6 literal holds hexadecimal digits, `:` and `.` only (\"[::1]\")");
    }
    if name.contains(char::is_whitespace) {
        return Some(
            "a server name has no spaces: give each name its own entry, `server_name = [\"www.example.org\", \"example.org\"]` for nginx's `server_name www.example.org example.org;`",
        );
    }
    if name.contains(':') {
        return Some(
            "a server name has no port (hosts are matched without theirs): the site's `listen` names the address and port",
        );
    }
    if !name.is_ascii() {
        return Some(
            "an internationalised name is written in its ASCII form (\"xn--...\"), as clients send it",
        );
    }
    (!name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'*')))
    .then_some("a server name holds letters, digits, `-`, `_` and `.` only (or starts with `~`: a regular expression)")
}

/// A `server_name` regular expression, compiled without letter case: hosts are matched in
/// lower case, and nginx compiles one holding an upper-case letter `NGX_REGEX_CASELESS`, so
/// `~^WWW\.Example\.org$` matches the host `www.example.org` there as here.
fn compile(re: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(re).case_insensitive(true).build()
}

/// Lower case, without a trailing dot.
fn normalise(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// The names of every site on one listen address, ready to match a Host.
#[derive(Debug, Default)]
pub struct Names<T> {
    exact: HashMap<String, T>,
    /// (suffix starting with '.', site), longest suffix first.
    leading: Vec<(String, T)>,
    /// (prefix ending with '.', site), longest prefix first.
    trailing: Vec<(String, T)>,
    /// In file order.
    regexes: Vec<(regex::Regex, T)>,
}

/// A name claimed by two sites on one address (`shellac check` refuses it, as nginx warns
/// and ignores the second).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server name \"{0}\" is claimed by two sites on one listen address")]
pub struct Conflict(pub String);

impl<T: Clone> Names<T> {
    /// An empty table.
    pub fn new() -> Self {
        Names {
            exact: HashMap::new(),
            leading: Vec::new(),
            trailing: Vec::new(),
            regexes: Vec::new(),
        }
    }

    /// Adds a site's patterns, in file order.
    pub fn add(&mut self, patterns: &[Pattern], site: T) -> Result<(), Conflict> {
        for p in patterns {
            match p {
                Pattern::Exact(n) => {
                    if self.exact.insert(n.clone(), site.clone()).is_some() {
                        return Err(Conflict(n.clone()));
                    }
                }
                Pattern::Leading(s) => {
                    if self.leading.iter().any(|(x, _)| x == s) {
                        return Err(Conflict(format!("*{s}")));
                    }
                    self.leading.push((s.clone(), site.clone()));
                    self.leading
                        .sort_by_key(|(x, _)| std::cmp::Reverse(x.len()));
                }
                Pattern::Trailing(s) => {
                    if self.trailing.iter().any(|(x, _)| x == s) {
                        return Err(Conflict(format!("{s}*")));
                    }
                    self.trailing.push((s.clone(), site.clone()));
                    self.trailing
                        .sort_by_key(|(x, _)| std::cmp::Reverse(x.len()));
                }
                Pattern::Regex(r) => {
                    // Checked by Pattern::parse; a pattern built by hand that does not compile
                    // matches nothing rather than failing here.
                    if let Ok(re) = compile(r) {
                        self.regexes.push((re, site.clone()));
                    }
                }
            }
        }
        Ok(())
    }

    /// The site for a Host (without its port), by nginx's precedence.
    pub fn find(&self, host: &str) -> Option<&T> {
        let host = normalise(host);
        if let Some(site) = self.exact.get(&host) {
            return Some(site);
        }
        // `*.example.org` matches `a.example.org` and `a.b.example.org`, not `example.org`.
        if let Some((_, site)) = self
            .leading
            .iter()
            .find(|(suffix, _)| host.len() > suffix.len() && host.ends_with(suffix.as_str()))
        {
            return Some(site);
        }
        if let Some((_, site)) = self
            .trailing
            .iter()
            .find(|(prefix, _)| host.len() > prefix.len() && host.starts_with(prefix.as_str()))
        {
            return Some(site);
        }
        self.regexes
            .iter()
            .find(|(re, _)| re.is_match(&host))
            .map(|(_, site)| site)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(sites: &[(&str, &str)]) -> Names<String> {
        let mut names = Names::new();
        for (written, site) in sites {
            names
                .add(&Pattern::parse(written).unwrap(), site.to_string())
                .unwrap();
        }
        names
    }

    #[test]
    fn nginx_precedence() {
        let t = table(&[
            ("~^www\\d+\\.example\\.org$", "regex"),
            ("mail.*", "trailing"),
            ("*.example.org", "leading-short"),
            ("*.www.example.org", "leading-long"),
            ("www.example.org", "exact"),
        ]);
        assert_eq!(t.find("www.example.org").map(String::as_str), Some("exact"));
        assert_eq!(
            t.find("WWW.Example.ORG.").map(String::as_str),
            Some("exact")
        );
        assert_eq!(
            t.find("a.www.example.org").map(String::as_str),
            Some("leading-long")
        );
        assert_eq!(
            t.find("www2.example.org").map(String::as_str),
            Some("leading-short"),
            "a wildcard before a regex"
        );
        assert_eq!(
            t.find("mail.example.com").map(String::as_str),
            Some("trailing")
        );
        assert_eq!(
            t.find("mail.example.org").map(String::as_str),
            Some("leading-short"),
            "leading before trailing"
        );
        assert_eq!(
            t.find("example.org"),
            None,
            "*.example.org is not example.org"
        );
        let t = table(&[("mail.*", "short"), ("mail.example.*", "long")]);
        assert_eq!(
            t.find("mail.example.com").map(String::as_str),
            Some("long"),
            "the longest trailing wildcard"
        );
        assert_eq!(t.find("mail.other.com").map(String::as_str), Some("short"));
        let t = table(&[
            ("~^www\\d+\\.example\\.net$", "regex1"),
            ("~^www", "regex2"),
        ]);
        assert_eq!(
            t.find("www7.example.net").map(String::as_str),
            Some("regex1"),
            "the first regex in file order"
        );
        assert_eq!(t.find("www.other").map(String::as_str), Some("regex2"));
    }

    #[test]
    fn regular_expressions_ignore_letter_case_as_nginx_compiles_them() {
        let t = table(&[("~^WWW\\d*\\.Example\\.ORG$", "regex")]);
        assert_eq!(
            t.find("www2.example.org").map(String::as_str),
            Some("regex")
        );
        assert_eq!(
            t.find("WWW.EXAMPLE.org.").map(String::as_str),
            Some("regex")
        );
    }

    #[test]
    fn a_leading_dot_is_the_name_and_its_subdomains() {
        let t = table(&[(".example.org", "both")]);
        assert_eq!(t.find("example.org").map(String::as_str), Some("both"));
        assert_eq!(t.find("x.example.org").map(String::as_str), Some("both"));
        assert_eq!(t.find("xexample.org"), None);
    }

    #[test]
    fn bad_names_and_conflicts_are_refused() {
        assert!(matches!(
            Pattern::parse("w*w.example.org"),
            Err(PatternError::Wildcard(_))
        ));
        assert!(matches!(
            Pattern::parse("*.*.org"),
            Err(PatternError::Wildcard(_))
        ));
        assert!(matches!(
            Pattern::parse("~(unclosed"),
            Err(PatternError::Regex(..))
        ));
        assert_eq!(Pattern::parse(" "), Err(PatternError::Empty));
        // Never a request's host: nginx's space-separated list pasted as one entry, a port,
        // a URL, a name not in its ASCII form.
        for bad in [
            "www.example.org example.org",
            "www.example.org:8080",
            "http://www.example.org/",
            "b\u{fc}cher.example",
            "[::1",
            "[zz]",
        ] {
            assert!(
                matches!(Pattern::parse(bad), Err(PatternError::NotAName(..))),
                "{bad}: {:?}",
                Pattern::parse(bad)
            );
        }
        for good in [
            "_",
            "xn--bcher-kva.example",
            "[::1]",
            "127.0.0.1",
            "my_host.lan.",
        ] {
            assert!(Pattern::parse(good).is_ok(), "{good}");
        }
        let mut t = table(&[("www.example.org", "a")]);
        assert_eq!(
            t.add(&Pattern::parse("WWW.example.org").unwrap(), "b".into()),
            Err(Conflict("www.example.org".into()))
        );
        assert!(
            t.add(&Pattern::parse("*.example.org").unwrap(), "c".into())
                .is_ok()
        );
        assert!(
            t.add(&Pattern::parse(".example.org").unwrap(), "d".into())
                .is_err()
        );
    }
}
