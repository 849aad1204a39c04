//! Directory listings (`autoindex = true`, nginx's `autoindex`): an HTML page of the names in
//! a directory without an index file. Only what the files origin would serve is listed — no
//! dotfiles unless `dotfiles`, no link leading out of the root unless `follow_symlinks`, no
//! PHP script nor copy of one (file or directory named like one, or a link to one, or a file
//! whose first bytes are PHP source with `sniff_scripts`: `scripts.rs`) unless
//! `send_scripts`, nothing this process may not open (a file it cannot
//! read, a directory it cannot read and search: its link would be a 403), only
//! regular files and directories — directories first, then by name; names are HTML-escaped
//! and links percent-encoded (every byte but the unreserved ones), so a file called
//! `<script>` or `javascript:x` is text and a relative link, never markup or a scheme. Runs on
//! the blocking pool, its work bounded whatever the directory holds: at most [`MAX_NAMES`]
//! names read, at most [`MAX_EXAMINED`] of them examined (a `stat`, an `open`, with
//! `sniff_scripts` a read of 1 KiB) — the first in the page's order, so a large directory's
//! page starts where a small one's does — at most [`MAX_ENTRIES`] listed; what is left out is
//! counted ([`Listing`]).

use std::fmt::Write as _;
use std::path::Path;
use std::time::SystemTime;

use super::scripts::{self, Named};

/// The most names one page lists (the rest are counted, not listed).
pub(crate) const MAX_ENTRIES: usize = 10_000;

/// The most names of one directory a listing examines on disk (a `stat`, an `open`, and with
/// `sniff_scripts` a read of the file's first KiB), listed or left out: the first in the
/// page's order (directories first, then by name); the names after them are counted unlisted
/// without being examined. Also the most names a listing holds at once while it reads.
pub(crate) const MAX_EXAMINED: usize = 2 * MAX_ENTRIES;

/// The most names of one directory a listing reads; past it the page says there are more.
pub(crate) const MAX_NAMES: usize = 100_000;

/// A directory's listing: the page, the names it left out because they would not be served
/// (hidden, unreadable, scripts and their copies, links out of the root, FIFOs, devices and
/// sockets), and the names past its bounds, not listed.
pub(crate) struct Listing {
    pub page: String,
    pub omitted: u64,
    pub unlisted: u64,
}

/// One name of the directory.
struct Entry {
    name: String,
    dir: bool,
    len: u64,
    modified: SystemTime,
}

/// A name waiting to be examined, ordered as the page lists names: directories (as the
/// directory entry tells, a link is not followed) first, then by name.
struct Waiting {
    order: (bool, String),
    entry: std::fs::DirEntry,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.order == other.order
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order.cmp(&other.order)
    }
}

/// What the listing is allowed to show.
pub(crate) struct Shown<'a> {
    pub root: &'a Path,
    pub dotfiles: bool,
    pub follow_symlinks: bool,
    pub send_scripts: bool,
    /// Leave out files whose first bytes are PHP source (`send_scripts = false` and
    /// `sniff_scripts`): their links would be refused.
    pub sniff: bool,
}

/// The listing of `dir` (a directory under the root), titled with `shown_as` (the request's
/// path of the directory, decoded, ending in `/`).
pub(crate) fn render(dir: &Path, shown_as: &str, shown: &Shown) -> std::io::Result<Listing> {
    render_within(dir, shown_as, shown, (MAX_NAMES, MAX_EXAMINED, MAX_ENTRIES))
}

/// [`render`] within these bounds: names read, examined, listed.
fn render_within(
    dir: &Path,
    shown_as: &str,
    shown: &Shown,
    (max_names, max_examined, max_entries): (usize, usize, usize),
) -> std::io::Result<Listing> {
    // The names a request could name, by name alone; of those, only the first
    // `max_examined` in the page's order (directories first, then by name, as the directory
    // entry tells) are kept: a max-heap whose largest goes whenever one more comes.
    let mut first = std::collections::BinaryHeap::new();
    let (mut read, mut omitted, mut unlisted) = (0usize, 0u64, 0u64);
    let mut past_names = false;
    for e in std::fs::read_dir(dir)? {
        if read == max_names {
            past_names = true;
            break;
        }
        read += 1;
        let Some((e, name)) = e.ok().and_then(|e| shown_name(e, shown)) else {
            omitted += 1;
            continue;
        };
        let dir = e.file_type().is_ok_and(|t| t.is_dir());
        first.push(Waiting {
            order: (!dir, name),
            entry: e,
        });
        if first.len() > max_examined {
            first.pop();
            unlisted += 1; // past the names examined: not examined
        }
    }
    // Examined (a `stat`, an `open`) in that order until the page is full.
    let mut entries = Vec::new();
    for Waiting {
        order: (_, name),
        entry,
    } in first.into_sorted_vec()
    {
        if entries.len() == max_entries {
            unlisted += 1;
            continue;
        }
        match shown_entry(&entry, name, shown) {
            Some(entry) => entries.push(entry),
            None => omitted += 1,
        }
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
    if past_names {
        let _ = writeln!(page, "(more than {unlisted} more not listed)");
    } else if unlisted > 0 {
        let _ = writeln!(page, "({unlisted} more not listed)");
    }
    page.push_str("</pre>\n<hr>\n</body>\n</html>\n");
    Ok(Listing {
        page,
        omitted,
        unlisted,
    })
}

/// The entry's name, if a request could name it and it is not left out by its name alone:
/// a dotfile (unless `dotfiles`), a script or its copy (unless `send_scripts`).
fn shown_name(e: std::fs::DirEntry, shown: &Shown) -> Option<(std::fs::DirEntry, String)> {
    // Not UTF-8: no request path could name it.
    let name = e.file_name().into_string().ok()?;
    if name.starts_with('.') && !shown.dotfiles {
        return None;
    }
    if name.chars().any(|c| c.is_control() || c == '\\') {
        return None; // a name `path.rs` refuses in a request
    }
    if !shown.send_scripts && scripts::named(&name) != Named::Plain {
        return None; // a script or its copy: its link would be refused (404)
    }
    Some((e, name))
}

/// The entry as listed, if its link would answer: examined on disk (`stat`, `open`, the first
/// KiB read with `sniff`).
fn shown_entry(e: &std::fs::DirEntry, name: String, shown: &Shown) -> Option<Entry> {
    let path = e.path();
    // A dangling link, or gone meanwhile: nothing.
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_dir() && !meta.is_file() {
        return None;
    }
    // Its link would be refused (403, `files_refused_unreadable`).
    let file = openable(&path, meta.is_dir())?;
    if shown.sniff && !meta.is_dir() && scripts::starts_as_source(&file).unwrap_or(false) {
        return None; // its link would be refused (404, `files_refused_script_source`)
    }
    if e.file_type().is_ok_and(|t| t.is_symlink())
        && (!shown.follow_symlinks || !shown.send_scripts)
    {
        let real = std::fs::canonicalize(&path).ok()?;
        if !shown.follow_symlinks && !real.starts_with(shown.root) {
            return None;
        }
        // A link with another name to a script or a copy (`a.txt -> x.php`).
        if !shown.send_scripts && scripts::real_named(shown.root, &real) != Named::Plain {
            return None;
        }
    }
    Some(Entry {
        name,
        dir: meta.is_dir(),
        len: meta.len(),
        modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
    })
}

/// Whether this process may open `path` (a link followed) as the files origin does: open a
/// file or directory for reading (with the flags `open.rs` uses: never blocks on it), and a
/// directory also searched (its listing, its index): `dir/.` stats only with that right.
/// As root every entry passes, as `open` does. The file opened, if it may.
fn openable(path: &Path, dir: bool) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    (!dir || std::fs::metadata(path.join(".")).is_ok()).then_some(opened)
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
        std::fs::write(dir.join("wp-config.backup"), "<?php $p = 1;").unwrap();
        std::os::unix::fs::symlink(dir.join("x.php"), dir.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(dir.join("a.txt"), dir.join("fine.txt")).unwrap();
        for send_scripts in [false, true] {
            let shown = Shown {
                root: &dir,
                dotfiles: false,
                follow_symlinks: false,
                send_scripts,
                sniff: !send_scripts,
            };
            let page = render(&dir, "/", &shown).unwrap().page;
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
                "href=\"wp-config.backup\"",
            ] {
                assert_eq!(page.contains(script), send_scripts, "{script}\n{page}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A directory's names past the bounds are counted, not examined; names left out are
    /// counted apart; a page with names unlisted says how many.
    #[test]
    fn bounds_are_kept_and_what_is_left_out_counted() {
        let dir = std::env::temp_dir().join(format!("shellac-bounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        for i in 0..6 {
            std::fs::write(dir.join(format!("f{i}.txt")), "x").unwrap();
        }
        for hidden in [".env", "x.php", "x.php.bak", "copy.txt"] {
            let text = if hidden == "copy.txt" {
                "<?php 1;"
            } else {
                "x"
            };
            std::fs::write(dir.join(hidden), text).unwrap();
        }
        let shown = Shown {
            root: &dir,
            dotfiles: false,
            follow_symlinks: false,
            send_scripts: false,
            sniff: true,
        };
        // Unbounded: 6 listed, 4 left out, none unlisted.
        let all = render_within(&dir, "/", &shown, (100, 100, 100)).unwrap();
        assert_eq!((all.omitted, all.unlisted), (4, 0));
        assert_eq!(all.page.matches("<a href=\"f").count(), 6);
        assert!(!all.page.contains("not listed"));
        // Two listed at most: the first two by name, whatever the directory's order; the
        // rest of the ten names unlisted, some left out before.
        let few = render_within(&dir, "/", &shown, (100, 100, 2)).unwrap();
        assert_eq!(few.page.matches("<a href=\"f").count(), 2);
        assert!(
            few.page.contains("\"f0.txt\"") && few.page.contains("\"f1.txt\""),
            "{}",
            few.page
        );
        // Examined at most 2: the first two in the page's order, a directory first
        // (`zdir/`, listed), then `copy.txt` (PHP source: left out); the six `f*.txt`
        // unlisted, not examined.
        std::fs::create_dir(dir.join("zdir")).unwrap();
        let two = render_within(&dir, "/", &shown, (100, 2, 100)).unwrap();
        assert!(two.page.contains("\"zdir/\""), "{}", two.page);
        assert_eq!(two.page.matches("<a href=\"f").count(), 0);
        assert_eq!((two.omitted, two.unlisted), (4, 6));
        std::fs::remove_dir(dir.join("zdir")).unwrap();
        assert_eq!(few.omitted + few.unlisted + 2, 10);
        assert!(
            few.page
                .contains(&format!("({} more not listed)", few.unlisted))
        );
        // Examined at most 3 (stat and open): never more listed than examined.
        let looked = render_within(&dir, "/", &shown, (100, 3, 100)).unwrap();
        assert!(looked.page.matches("<a href=\"f").count() <= 3);
        assert_eq!(
            looked.omitted + looked.unlisted + looked.page.matches("<a href=\"f").count() as u64,
            10
        );
        // Five names read at most: the page says there are more than it counted.
        let read = render_within(&dir, "/", &shown, (5, 100, 100)).unwrap();
        assert!(read.page.contains("(more than"), "{}", read.page);
        assert_eq!(
            read.omitted + read.page.matches("<a href=\"f").count() as u64,
            5
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
