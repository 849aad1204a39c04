//! The cookie VMOD's jar: a request's cookies as an ordered list of names and values, parsed
//! from a `Cookie` header, edited by name or regex, and written back.

use crate::vcl::pcre::{LimitHit, Pattern};

/// Cookies of one request, in the order they came (bounded by the request's header size).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CookieJar {
    cookies: Vec<(String, String)>,
}

impl CookieJar {
    /// Reads `header` (`a=1; b=2`) into the jar, replacing what it held.
    pub fn parse(&mut self, header: &str) {
        self.cookies.clear();
        for pair in header.split(';') {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            self.set(name, value.trim());
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Adds a cookie, or replaces the value of the one with this name.
    pub fn set(&mut self, name: &str, value: &str) {
        match self.cookies.iter_mut().find(|(n, _)| n == name) {
            Some(c) => c.1 = value.to_string(),
            None => self.cookies.push((name.to_string(), value.to_string())),
        }
    }

    pub fn delete(&mut self, name: &str) {
        self.cookies.retain(|(n, _)| n != name);
    }

    /// Removes the cookies named in the comma-separated `names`.
    pub fn filter(&mut self, names: &str) {
        let list: Vec<&str> = names.split(',').map(str::trim).collect();
        self.cookies.retain(|(n, _)| !list.contains(&n.as_str()));
    }

    /// Keeps only the cookies named in the comma-separated `names`.
    pub fn keep(&mut self, names: &str) {
        let list: Vec<&str> = names.split(',').map(str::trim).collect();
        self.cookies.retain(|(n, _)| list.contains(&n.as_str()));
    }

    /// Removes the cookies whose name matches `re`; how many matches ran past the match
    /// limit (a failed match: such a cookie stays).
    pub fn filter_re(&mut self, re: &Pattern) -> usize {
        let mut limited = 0;
        self.cookies.retain(|(n, _)| match re.is_match(n) {
            Ok(m) => !m,
            Err(LimitHit) => {
                limited += 1;
                true
            }
        });
        limited
    }

    /// Keeps only the cookies whose name matches `re`; how many matches ran past the match
    /// limit (a failed match: such a cookie goes).
    pub fn keep_re(&mut self, re: &Pattern) -> usize {
        let mut limited = 0;
        self.cookies.retain(|(n, _)| match re.is_match(n) {
            Ok(m) => m,
            Err(LimitHit) => {
                limited += 1;
                false
            }
        });
        limited
    }

    pub fn clean(&mut self) {
        self.cookies.clear();
    }

    /// The jar as a `Cookie` header value (`a=1; b=2`).
    pub fn to_header(&self) -> String {
        let mut out = String::new();
        for (n, v) in &self.cookies {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str(n);
            out.push('=');
            out.push_str(v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_edit_write_back() {
        let mut j = CookieJar::default();
        j.parse("_ga=GA1; session=abc; lang=en;  ; =x; flag");
        assert_eq!(j.get("session"), Some("abc"));
        assert_eq!(j.get("flag"), Some(""));
        j.filter_re(&Pattern::new("^_", 10).unwrap());
        j.set("lang", "fr");
        assert_eq!(j.to_header(), "session=abc; lang=fr; flag=");
        j.keep("session, lang");
        assert_eq!(j.to_header(), "session=abc; lang=fr");
        j.filter("lang");
        assert_eq!(j.to_header(), "session=abc");
        j.parse("a=1");
        assert_eq!(j.to_header(), "a=1", "parse replaces the jar");
        j.clean();
        assert_eq!(j.to_header(), "");
    }
}
