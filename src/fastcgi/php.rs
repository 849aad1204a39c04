//! Which file names are PHP scripts — the one definition the files origin refuses to send
//! (`backend/files/scripts.rs`), hands to a `try_files` `@NAME` fallback, leaves out of its
//! listings, and `shellac check` refuses as a `try_files` entry (`config/try_files.rs`).
//!
//! The extensions are every one that a Debian machine's defaults hand to PHP, so a name any
//! of them would run, or would show as highlighted source, is never sent as a file:
//! - `.php`, `.phtml`, `.phar`: Debian's `/etc/apache2/conf-available/php8.2-fpm.conf`
//!   (`<FilesMatch ".+\.ph(?:ar|p|tml)$">` → PHP-FPM; mod_php's `php8.2.conf` has the same);
//! - `.phps`: the same file's source-highlighting handler, which Debian denies by default
//!   (`<FilesMatch ".+\.phps$"> Require all denied`);
//! - `.php3`, `.php4`, `.php5`, `.php7`: the list PHP-FPM's pool file proposes for
//!   `security.limit_extensions` (`/etc/php/8.2/fpm/pool.d/www.conf`), with `.php6` and
//!   `.php8` for the versions between and after, and `.pht`: Debian's older PHP handler
//!   (`.+\.ph(p[345]?|t|tml)$`), still found on hosts upgraded since.
//!
//! Compared without letter case (`/A.PHTML`), on names already percent-decoded, and a name
//! that is only the extension (`.php`) is one too (Debian denies those: `^\.ph(?:ar|p|ps|tml)$`).
//! The FastCGI origin still splits PATH_INFO at `.php` alone (`params::split_script`): PHP-FPM
//! runs only `.php` unless its pool widens `security.limit_extensions`, so a split at `.phtml`
//! would hand it a script it answers "Access denied" for; such a path goes to the front
//! controller instead, which never sends a source either.

/// The extensions, lower case, without the dot.
pub const PHP_EXTENSIONS: &[&str] = &[
    "php", "phtml", "phar", "phps", "pht", "php3", "php4", "php5", "php6", "php7", "php8",
];

/// Whether the file name `name` (one decoded path segment) has a PHP extension.
pub fn is_php_name(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(_, ext)| {
        PHP_EXTENSIONS
            .iter()
            .any(|php| ext.eq_ignore_ascii_case(php))
    })
}

/// Whether some segment of `path` (split at `/`, each segment's `%XX` escapes decoded) has a
/// PHP extension: `/a.php/b`, `/x%2ePhTmL`. An escape that is not one is kept as written.
pub fn names_php(path: &str) -> bool {
    path.split('/').any(|segment| is_php_name(&decode(segment)))
}

/// `segment` with its valid `%XX` escapes decoded (bytes that are not UTF-8 replaced).
fn decode(segment: &str) -> String {
    if !segment.contains('%') {
        return segment.to_string();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_php_family_in_any_case_is_a_script() {
        for name in [
            "wp-config.php",
            "a.phtml",
            "lib.phar",
            "show.phps",
            "old.pht",
            "a.php3",
            "a.php4",
            "a.php5",
            "a.php6",
            "a.php7",
            "a.php8",
            "A.PHP",
            "a.PhTmL",
            ".php",
            "x.tar.phar",
        ] {
            assert!(is_php_name(name), "{name}");
        }
        for name in [
            "style.css",
            "php",
            "a.php.bak",
            "a.php2",
            "a.php9",
            "a.phpx",
            "a.html",
            "a.ph",
            "",
        ] {
            assert!(!is_php_name(name), "{name}");
        }
    }

    #[test]
    fn a_path_names_php_in_any_segment_escaped_or_not() {
        for path in [
            "/wp-config.php",
            "/a/b.phtml/extra",
            "/x%2ephp",
            "/x%2EPHAR",
            "$uri.php",
            "/index.php5",
            "/uploads/evil.jpg/x.pht",
        ] {
            assert!(names_php(path), "{path}");
        }
        for path in [
            "/",
            "/php/",
            "/a.php.bak",
            "/x%2",
            "/x.ph%zzp",
            "/%2e%2e/",
            "/x%+2php",
        ] {
            assert!(!names_php(path), "{path}");
        }
    }
}
