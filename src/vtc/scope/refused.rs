//! Files that fail on purpose: they send what Shellac refuses by design, or expect a byte
//! Shellac never puts on the wire, where Varnish is lenient. Such a file is set aside before
//! it runs — reported as skipped with the refusal and its reason, and counted on a line of its
//! own in the summary (docs/varnishtest.md, "Set aside as refused by design") — so that the
//! pass rate of the files run measures what Shellac could pass, and nobody reads a strict
//! parser's refusal as a defect, nor a set-aside file as a pass. Found from the script's text:
//! - `txreq -url X` with X not starting with `/` and neither absolute-form (`scheme://`) nor
//!   `*` (nor a `CONNECT`'s authority): RFC 9112 §3.2's origin-form requires the `/`;
//! - `txreq -proto ""`: a request line without an HTTP version (RFC 9112 §3);
//! - a server's `expect req.url == "..."` with a byte RFC 3986 does not allow raw in a
//!   request target (`"`, `<`, `>`, `\`, `` ` ``, space, controls, non-ASCII): what
//!   Shellac sends there (an ESI include's decoded `&lt;`) is percent-encoded (`/%3C`).

use super::super::lex::{self, Command};

/// The reason given for a request target without `/`.
pub const NO_SLASH: &str = "refused by design: sends a request target without '/', \
     which Shellac refuses (RFC 9112 §3.2)";
/// The reason given for a request line without a version.
pub const NO_VERSION: &str = "refused by design: sends a request line without an HTTP \
     version, which Shellac refuses (RFC 9112 §3)";
/// The reason given for a raw byte RFC 3986 forbids.
pub const RAW_BYTE: &str = "refused by design: expects a request target with characters \
     RFC 3986 does not allow raw; Shellac percent-encodes them";

/// Why the file is set aside as refused by design (with its line), or `None`.
pub fn refused(cmds: &[Command]) -> Option<String> {
    for c in cmds {
        let found = match c.name() {
            "server" | "client" => c
                .words
                .iter()
                .skip(2)
                .filter(|w| w.block)
                .find_map(|w| spec(&w.text, w.line)),
            "loop" => c
                .words
                .get(2)
                .and_then(|b| lex::split(&b.text, b.line).ok())
                .and_then(|inner| refused(&inner)),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// In a client's or server's specification.
fn spec(text: &str, line: u32) -> Option<String> {
    let cmds = lex::split(text, line).ok()?;
    for c in &cmds {
        let words: Vec<&str> = c.words.iter().map(|w| w.text.as_str()).collect();
        let why = match words.first().copied() {
            Some("txreq") => txreq(&words),
            Some("expect") => expect(&words),
            Some("loop") => c.words.get(2).and_then(|b| spec(&b.text, b.line)),
            _ => None,
        };
        if let Some(why) = why {
            if why.contains("(line ") {
                return Some(why);
            }
            return Some(format!("{why} (line {})", c.line));
        }
    }
    None
}

/// The value after `option` in `words`.
fn option<'a>(words: &[&'a str], option: &str) -> Option<&'a str> {
    let at = words.iter().position(|w| *w == option)?;
    words.get(at + 1).copied()
}

fn txreq(words: &[&str]) -> Option<String> {
    if option(words, "-proto") == Some("") {
        return Some(NO_VERSION.to_string());
    }
    let url = option(words, "-url")?;
    let connect = option(words, "-method")
        .or_else(|| option(words, "-req"))
        .is_some_and(|m| m.eq_ignore_ascii_case("CONNECT"));
    // A macro's value is not known here; `*` is OPTIONS's asterisk-form.
    let fine = url.starts_with('/')
        || url.starts_with('$')
        || url == "*"
        || url.contains("://")
        || connect;
    (!fine).then(|| NO_SLASH.to_string())
}

fn expect(words: &[&str]) -> Option<String> {
    match words {
        [_, "req.url", "==", value, ..] if value.bytes().any(raw_forbidden) => {
            Some(RAW_BYTE.to_string())
        }
        _ => None,
    }
}

/// A byte a request target may not carry raw (RFC 3986's characters, as `http/strict.rs`
/// refuses them and the ESI include encodes them).
fn raw_forbidden(b: u8) -> bool {
    !(0x21..0x7f).contains(&b) || matches!(b, b'"' | b'<' | b'>' | b'\\' | b'`')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(src: &str) -> Option<String> {
        refused(&lex::split(src, 1).unwrap_or_default())
    }

    #[test]
    fn refusals_by_design_are_found_in_the_script() {
        let no_slash = of("client c1 {\n txreq -url bar\n rxresp\n} -run").unwrap();
        assert!(no_slash.starts_with(NO_SLASH), "{no_slash}");
        assert!(no_slash.ends_with("(line 2)"), "{no_slash}");
        assert!(
            of("client c1 { txreq -url \"from_vcl\" } -run")
                .unwrap()
                .contains("RFC 9112 §3.2")
        );
        assert!(
            of("client c1 {\n txreq -url /foo -proto \"\"\n} -run")
                .unwrap()
                .starts_with(NO_VERSION)
        );
        assert!(
            of("server s1 {\n rxreq\n expect req.url == \"/<\"\n} -start")
                .unwrap()
                .starts_with(RAW_BYTE)
        );
        assert!(
            of("server s1 {\n rxreq\n expect req.url == {/\"}\n} -start")
                .unwrap()
                .starts_with(RAW_BYTE)
        );
        assert!(
            of("loop 2 {\n client c1 { txreq -url bar } -run\n}")
                .unwrap()
                .starts_with(NO_SLASH)
        );
    }

    #[test]
    fn valid_targets_are_not_set_aside() {
        for ok in [
            "client c1 { txreq -url * -req OPTIONS } -run",
            "client c1 { txreq -url http://example.com/x } -run",
            "client c1 { txreq -req CONNECT -url example.com:443 } -run",
            "client c1 { txreq -url ${url} } -run",
            "client c1 { txreq -proto HTTP/1.0 } -run",
            "server s1 { rxreq\n expect req.url == \"/&\" } -start",
            "server s1 { rxreq\n expect req.url ~ \"<\" } -start",
        ] {
            assert_eq!(of(ok), None, "{ok}");
        }
    }
}
