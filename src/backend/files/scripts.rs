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

use std::path::Path;

use super::path;
use super::refusal::Refusal;
use crate::fastcgi::php;

/// What a name is, for the files origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Named {
    /// An ordinary file or directory.
    Plain,
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Named, names_a_script, path_named, real_named};

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
