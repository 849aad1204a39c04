//! A files origin never sends a PHP script's source unless its backend says so
//! (`send_scripts = true`): a path with a segment named like a PHP script — `.php`, `.phtml`,
//! `.phar`, `.phps`, ... in any letter case, escaped or not, the family Debian's defaults
//! hand to PHP (`fastcgi/php.rs`, the one definition) — is answered `404` without a look at
//! the disk, and so is a script found another way (a directory's `index`, a `try_files`
//! entry): `Refusal::Script` (`refusal.rs`), counted in `files_script_refused`. A
//! `try_files` ending in `@NAME` hands such a path to `NAME` instead (`try_files.rs`).
//!
//! A script's copy (`wp-config.php~`, `x.php.bak`, `.x.php.swp`, `x.php.gz`: `php.rs`'s
//! `is_php_copy`) is refused the same way, `Refusal::ScriptCopy`, counted in
//! `files_refused_script_copy` — even with a `try_files` `@NAME`, since PHP would not run it.
//! And the name that counts is the file's real one too: a symbolic link with another name
//! (`a.txt -> x.php`, `docs -> app.phar/`) is refused by what it leads to (`real_named`,
//! read by `open.rs` from the file actually opened), as are links to copies.
//!
//! And what a file holds counts, whatever its name: a regular file whose first bytes are PHP
//! source (`source`: `<?php` or `<?=` after an optional UTF-8 BOM, a `#!` line and
//! whitespace) is a script's copy under an invented name (`wp-config.backup`,
//! `index.php.old2`) — `Named::Source`, refused as `Refusal::ScriptSource`, counted in
//! `files_refused_script_source`, unless `sniff_scripts = false`. `open.rs` reads those bytes
//! once per open (the open-file cache keeps the verdict with the descriptor), never on a hit
//! of the memory tier.

use std::path::Path;

use super::path;
use super::refusal::Refusal;
use crate::fastcgi::php;

/// What a name is, for the files origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Named {
    /// An ordinary file or directory.
    Plain,
    /// A file named like an ordinary one whose first bytes are PHP source (`source`).
    Source,
    /// A copy of a PHP script (`x.php.bak`).
    Copy,
    /// A PHP script (`x.php`).
    Script,
}

impl Named {
    /// The refusal of a name that is not plain (while `send_scripts = false`).
    pub(super) fn refusal(self) -> Option<Refusal> {
        match self {
            Named::Plain => None,
            Named::Source => Some(Refusal::ScriptSource),
            Named::Copy => Some(Refusal::ScriptCopy),
            Named::Script => Some(Refusal::Script),
        }
    }
}

/// What the file name `name` (decoded) is.
pub(super) fn named(name: &str) -> Named {
    if php::is_php_name(name) {
        Named::Script
    } else if php::is_php_copy(name) {
        Named::Copy
    } else {
        Named::Plain
    }
}

/// What the request path `raw` (still escaped) names, by the most telling of its segments —
/// any letter case, escaped or not (`/a.PHP`, `/a%2ephtml/x`, `/x.php%7e`). A path the files
/// origin refuses anyway (`..`, a bad escape) is left to that refusal.
pub(super) fn path_named(raw: &str) -> Named {
    path::parse(raw, true).map_or(Named::Plain, |names| {
        names
            .names
            .iter()
            .map(|n| named(n))
            .max()
            .unwrap_or(Named::Plain)
    })
}

/// Whether `raw` has a segment named like a PHP script (not a copy).
pub(super) fn names_a_script(raw: &str) -> bool {
    path_named(raw) == Named::Script
}

/// Whether the file name `name` (decoded) is a PHP script's.
pub(super) fn is_script(name: &str) -> bool {
    php::is_php_name(name)
}

/// What the file or directory really at `real` is, the root being `root` (both canonical):
/// by every name on its way below the root (`a.txt -> lib/x.php`, `d -> app.phar/` and
/// what is under it), or by its own name when a link (`follow_symlinks`) leads out of it.
pub(super) fn real_named(root: &Path, real: &Path) -> Named {
    let names: Vec<&std::ffi::OsStr> = match real.strip_prefix(root) {
        Ok(below) => below.iter().collect(),
        Err(_) => real.file_name().into_iter().collect(),
    };
    names
        .into_iter()
        .map(|n| named(&n.to_string_lossy()))
        .max()
        .unwrap_or(Named::Plain)
}

/// How many first bytes of a file `source` is given: a PHP open tag after more than this
/// much whitespace is not seen.
pub(super) const SNIFFED: usize = 1024;

/// Whether `head` (a file's first bytes, at most [`SNIFFED`]) starts PHP source as PHP reads
/// it: after an optional UTF-8 byte-order mark, an optional `#!` line (a CLI script's) and
/// whitespace, the open tag `<?php` (any case) followed by whitespace or the end of the file,
/// or the short echo tag `<?=` (always on since PHP 5.4). `<?xml` and a bare `<?` (only with
/// `short_open_tag`, off in php.ini-production) are not.
pub(super) fn source(head: &[u8]) -> bool {
    let mut rest = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    if rest.starts_with(b"#!") {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return false;
        };
        rest = &rest[end + 1..];
    }
    let start = rest
        .iter()
        .position(|b| !b.is_ascii_whitespace() && *b != 0x0b)
        .unwrap_or(rest.len());
    let rest = &rest[start..];
    if rest.starts_with(b"<?=") {
        return true;
    }
    rest.len() >= 5
        && rest[..5].eq_ignore_ascii_case(b"<?php")
        && rest.get(5).is_none_or(|b| b.is_ascii_whitespace())
}

/// Whether the regular file `file` starts with PHP source (`source`): one `pread` of its
/// first [`SNIFFED`] bytes, the offset untouched (a file shorter than that in one read; a
/// read cut short by a signal is taken as it is).
pub(super) fn starts_as_source(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; SNIFFED];
    let n = file.read_at(&mut head, 0)?;
    Ok(source(&head[..n]))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Named, names_a_script, path_named, real_named, source};

    #[test]
    fn php_source_is_known_by_its_first_bytes() {
        for head in [
            &b"<?php define('DB_PASSWORD', 'x');"[..],
            b"<?PHP\n",
            b"<?php",
            b"\xEF\xBB\xBF<?php\n",
            b"\n\n  \t<?php\r\n",
            b"<?= $title ?>",
            b"#!/usr/bin/env php\n<?php\n",
            b"\xEF\xBB\xBF\r\n<?= 1 ?>",
        ] {
            assert!(source(head), "{}", String::from_utf8_lossy(head));
        }
        for head in [
            &b""[..],
            b"plain text that mentions <?php later",
            b"<?xml version=\"1.0\"?>",
            b"<? echo 1; ?>",
            b"<?phpx",
            b"<html><?php echo 1; ?>",
            b"#!/bin/sh\necho <?php",
            b"#!/usr/bin/env php",
            b"\xEF\xBB<?php\n",
            b"GIF89a<?php",
        ] {
            assert!(!source(head), "{}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn script_paths_are_the_php_family_in_any_spelling() {
        for raw in [
            "/wp-config.php",
            "/index.PHP",
            "/a/b.php/extra/path",
            "/uploads/evil.jpg/x.php",
            "/x%2ephp",
            "/a.phps",
            "/a.PhTmL",
            "/lib/app.phar/x",
            "/old.php5",
            "/old%2Epht",
            "/.php",
        ] {
            assert!(names_a_script(raw), "{raw}");
        }
        for raw in ["/", "/style.css", "/php/", "/a.php.bak", "/%2e%2e/a.php"] {
            assert!(!names_a_script(raw), "{raw}");
        }
    }

    #[test]
    fn copies_of_scripts_are_named_in_any_spelling() {
        for raw in [
            "/wp-config.php~",
            "/wp-config.php%7E",
            "/%23wp-config.php%23",
            "/a/x.PHP.BAK",
            "/x.php.gz",
            "/x%2ephp.swp",
            "/old.php.orig/readme.txt",
        ] {
            assert_eq!(path_named(raw), Named::Copy, "{raw}");
        }
        // A script anywhere in the path is the stronger name.
        assert_eq!(path_named("/x.php.bak/y.php"), Named::Script);
        for raw in [
            "/php.ini.txt",
            "/notes.php.txt",
            "/style.css.gz",
            "/a%zz.php.bak",
        ] {
            assert_eq!(path_named(raw), Named::Plain, "{raw}");
        }
    }

    #[test]
    fn a_file_is_named_by_where_it_really_is() {
        let root = Path::new("/srv/www");
        for (real, named) in [
            ("/srv/www", Named::Plain),
            ("/srv/www/a.txt", Named::Plain),
            ("/srv/www/lib/x.php", Named::Script),
            ("/srv/www/app.phar/readme.txt", Named::Script),
            ("/srv/www/x.php.bak", Named::Copy),
            ("/srv/www/old.php~/a.txt", Named::Copy),
            // Out of the root (`follow_symlinks`): its own name only.
            ("/usr/share/doc/x.php", Named::Script),
            ("/usr/share/doc/x.php.gz", Named::Copy),
            ("/home/u/site.php/a.txt", Named::Plain),
        ] {
            assert_eq!(real_named(root, Path::new(real)), named, "{real}");
        }
    }
}
