//! A files origin never sends a PHP script's source unless its backend says so
//! (`send_scripts = true`): a path with a segment named like a PHP script — `.php`, `.phtml`,
//! `.phar`, `.phps`, ... in any letter case, escaped or not, the family Debian's defaults
//! hand to PHP (`fastcgi/php.rs`, the one definition) — is answered `404` without a look at
//! the disk, and so is a script found another way (a directory's `index`, a `try_files`
//! entry): `Refusal::Script` (`refusal.rs`), counted in `files_script_refused`. A
//! `try_files` ending in `@NAME` hands such a path to `NAME` instead (`try_files.rs`).

use super::path;

/// Whether `raw` (the request path, still escaped) has a segment named like a PHP script —
/// any letter case, escaped or not (`/a.PHP`, `/a%2ephtml/x`). A path the files origin
/// refuses anyway (`..`, a bad escape) is left to that refusal.
pub(super) fn names_a_script(raw: &str) -> bool {
    path::parse(raw, true).is_ok_and(|names| names.names.iter().any(|n| is_script(n)))
}

/// Whether the file name `name` (decoded) is a PHP script's.
pub(super) fn is_script(name: &str) -> bool {
    crate::fastcgi::php::is_php_name(name)
}

#[cfg(test)]
mod tests {
    use super::names_a_script;

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
}
