//! Directory listings (`autoindex = true`, nginx's `autoindex`): an HTML page of the names in
//! a directory without an index file. Only what the files origin would serve is listed — no
//! dotfiles unless `dotfiles`, no link leading out of the root unless `follow_symlinks`, no
//! PHP script nor copy of one (file or directory named like one, or a link to one:
//! `scripts.rs`) unless `send_scripts`, only
//! regular files and directories — directories first, then by name; names are HTML-escaped
//! and links percent-encoded (every byte but the unreserved ones), so a file called
//! `<script>` or `javascript:x` is text and a relative link, never markup or a scheme. Runs on
//! the blocking pool.

use std::fmt::Write as _;
use std::path::Path;
use std::time::SystemTime;

use super::scripts::{self, Named};

/// The most names one page lists (the rest are counted, not listed).
pub(crate) const MAX_ENTRIES: usize = 10_000;

/// One name of the directory.
struct Entry {
    name: String,
    dir: bool,
    len: u64,
    modified: SystemTime,
}

/// What the listing is allowed to show.
pub(crate) struct Shown<'a> {
    pub root: &'a Path,
    pub dotfiles: bool,
    pub follow_symlinks: bool,
    pub send_scripts: bool,
}

/// The listing of `dir` (a directory under the root), titled with `shown_as` (the request's
/// path of the directory, decoded, ending in `/`).
pub(crate) fn render(dir: &Path, shown_as: &str, shown: &Shown) -> std::io::Result<String> {
    let mut entries = Vec::new();
    let mut more = 0usize;
    for e in std::fs::read_dir(dir)? {
        let Ok(e) = e else { continue };
        let Ok(name) = e.file_name().into_string() else {
            continue; // not UTF-8: no request path could name it
        };
        if name.starts_with('.') && !shown.dotfiles {
            continue;
        }
        if name.chars().any(|c| c.is_control() || c == '\\') {
            continue; // a name `path.rs` refuses in a request
        }
        if !shown.send_scripts && scripts::named(&name) != Named::Plain {
            continue; // a script or its copy: its link would be refused (404)
        }
        let path = e.path();
        let Ok(meta) = std::fs::metadata(&path) else {
            continue; // a dangling link, or gone meanwhile
        };
        if !meta.is_dir() && !meta.is_file() {
            continue;
        }
        if e.file_type().is_ok_and(|t| t.is_symlink())
            && (!shown.follow_symlinks || !shown.send_scripts)
        {
            let Ok(real) = std::fs::canonicalize(&path) else {
                continue;
            };
            if !shown.follow_symlinks && !real.starts_with(shown.root) {
                continue;
            }
            // A link with another name to a script or a copy (`a.txt -> x.php`).
            if !shown.send_scripts && scripts::real_named(shown.root, &real) != Named::Plain {
                continue;
            }
        }
        if entries.len() == MAX_ENTRIES {
            more += 1;
            continue;
        }
        entries.push(Entry {
            name,
            dir: meta.is_dir(),
            len: meta.len(),
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        });
    }
    entries.sort_by(|a, b| b.dir.cmp(&a.dir).then_with(|| a.name.cmp(&b.name)));
    let title = escape(shown_as);
    let mut page = format!(
        "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body>\n<h1>Index of {title}</h1>\n<hr>\n<pre>\n"
    );
    if shown_as != "/" {
        page.push_str("<a href=\"../\">../</a>\n");
    }
    for e in &entries {
        let slash = if e.dir { "/" } else { "" };
        let size = if e.dir {
            "-".to_string()
        } else {
            e.len.to_string()
        };
        let _ = writeln!(
            page,
            "<a href=\"{}{slash}\">{}{slash}</a> {} {size}",
            encode(&e.name),
            escape(&e.name),
            httpdate::fmt_http_date(e.modified),
        );
    }
    if more > 0 {
        let _ = writeln!(page, "({more} more not listed)");
    }
    page.push_str("</pre>\n<hr>\n</body>\n</html>\n");
    Ok(page)
}

/// Text as HTML text or attribute value.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A name as one path segment of a relative link: every byte but `A-Z a-z 0-9 - . _ ~`
/// percent-encoded (a `:` too, so no name reads as a scheme).
fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_text_and_links_are_relative() {
        assert_eq!(
            escape("<img src=x onerror='a'>&\""),
            "&lt;img src=x onerror=&#39;a&#39;&gt;&amp;&quot;"
        );
        assert_eq!(encode("javascript:alert(1)"), "javascript%3Aalert%281%29");
        assert_eq!(encode("a b/c\"d"), "a%20b%2Fc%22d");
        assert_eq!(encode("café.txt"), "caf%C3%A9.txt");
    }

    /// Scripts (files and directories named like one), their copies and links with another
    /// name to one are listed only with `send_scripts`.
    #[test]
    fn scripts_are_listed_only_when_sent() {
        let dir = std::env::temp_dir().join(format!("shellac-listing-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("lib.phar")).unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        for name in [
            "a.txt",
            "x.php",
            "y.PHTML",
            "notes.php.txt",
            "x.php.bak",
            "x.php~",
        ] {
            std::fs::write(dir.join(name), "x").unwrap();
        }
        std::os::unix::fs::symlink(dir.join("x.php"), dir.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(dir.join("a.txt"), dir.join("fine.txt")).unwrap();
        for send_scripts in [false, true] {
            let shown = Shown {
                root: &dir,
                dotfiles: false,
                follow_symlinks: false,
                send_scripts,
            };
            let page = render(&dir, "/", &shown).unwrap();
            for always in ["a.txt", "notes.php.txt", "fine.txt"] {
                assert!(page.contains(&format!("href=\"{always}\"")), "{page}");
            }
            for script in [
                "href=\"x.php\"",
                "href=\"y.PHTML\"",
                "href=\"lib.phar/\"",
                "href=\"x.php.bak\"",
                "href=\"x.php~\"",
                "href=\"link.txt\"",
            ] {
                assert_eq!(page.contains(script), send_scripts, "{script}\n{page}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
