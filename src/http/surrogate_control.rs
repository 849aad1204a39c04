//! `Surrogate-Control` and `Surrogate-Capability` (W3C Edge Architecture Specification 1.0):
//! how an origin talks to the surrogate in front of it. The surrogate names itself upstream
//! with a device token and its capabilities (`Surrogate-Capability: shellac="ESI/1.0"`); the
//! origin answers with directives for all surrogates or, after `;token`, for one:
//! `content="ESI/1.0"` (process the body as ESI), `max-age=N[+M]` (the surrogate's own
//! freshness lifetime, and how long it may serve the object stale past it), `no-store`.
//! Shellac is the last surrogate before the client: the field never leaves it
//! (`proxy/deliver.rs`).

use std::time::Duration;

/// The directives of a response's `Surrogate-Control` meant for this surrogate.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SurrogateControl {
    /// `content="... ESI/1.0 ..."`.
    pub esi: bool,
    /// Its other directives, without their `;token`, in `Cache-Control`'s words:
    /// `max-age=N+M` as `max-age=N, stale-while-revalidate=M` (M: how long past its
    /// freshness the object may still be served).
    pub directives: Vec<String>,
}

/// Splits a field value at commas outside quoted strings.
fn directives(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in value.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&value[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect()
}

/// Seconds as `delta-seconds` (digits only).
fn seconds(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_secs(s.parse::<u64>().unwrap_or(u64::MAX)))
}

impl SurrogateControl {
    /// The directives of the `Surrogate-Control` lines `values` for the surrogate named
    /// `token` (those without a target, and those after `;token`); those for other devices
    /// are left out.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a [u8]>, token: &str) -> SurrogateControl {
        let mut sc = SurrogateControl::default();
        for line in values {
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            for d in directives(line) {
                let (directive, target) = match d.rsplit_once(';') {
                    Some((dir, t)) if !t.contains('"') => (dir.trim(), Some(t.trim())),
                    _ => (d, None),
                };
                if target.is_some_and(|t| !t.eq_ignore_ascii_case(token)) {
                    continue;
                }
                let (name, value) = match directive.split_once('=') {
                    Some((n, v)) => (n.trim(), Some(v.trim())),
                    None => (directive, None),
                };
                if name.eq_ignore_ascii_case("content") {
                    let list = value.unwrap_or("").trim_matches('"');
                    sc.esi |= list
                        .split_ascii_whitespace()
                        .any(|p| p.eq_ignore_ascii_case("ESI/1.0"));
                } else if name.eq_ignore_ascii_case("max-age")
                    && let Some((age, stale)) = value.and_then(|v| v.split_once('+'))
                {
                    if let (Some(a), Some(s)) = (seconds(age), seconds(stale)) {
                        sc.directives.push(format!("max-age={}", a.as_secs()));
                        sc.directives
                            .push(format!("stale-while-revalidate={}", s.as_secs()));
                    }
                } else {
                    sc.directives.push(directive.to_string());
                }
            }
        }
        sc
    }
}

/// The `Surrogate-Capability` value naming surrogate `token` as an ESI 1.0 processor.
pub fn capability(token: &str) -> String {
    format!("{token}=\"ESI/1.0\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &str) -> SurrogateControl {
        SurrogateControl::parse([v.as_bytes()], "shellac")
    }

    #[test]
    fn directives_for_every_surrogate_and_for_this_one() {
        let sc = parse(r#"content="ESI/1.0", max-age=60+30"#);
        assert!(sc.esi);
        assert_eq!(sc.directives, ["max-age=60", "stale-while-revalidate=30"]);
        let sc = parse(r#"content="ESI/1.0 ESI-INV/1.0";shellac, no-store;cdn, max-age=5"#);
        assert!(sc.esi);
        assert_eq!(sc.directives, ["max-age=5"]);
        let sc = parse(r#"content="ESI/1.0";other, no-store;SHELLAC"#);
        assert!(!sc.esi);
        assert_eq!(sc.directives, ["no-store"]);
        let sc = parse("no-store, content=\"ESI/2.0\"");
        assert!(!sc.esi);
        assert_eq!(sc.directives, ["no-store"]);
        assert_eq!(capability("shellac"), "shellac=\"ESI/1.0\"");
    }
}
