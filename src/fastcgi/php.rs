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
//!
//! A script's *copy* ([`is_php_copy`]) is a name whose PHP extension is followed by the
//! marks editors, tools and people leave on saved, backed-up or compressed copies:
//! `wp-config.php~`, `#x.php#`, `x.php.bak`, `.x.php.swp`, `x.php.save.1`, `x.php.~2~`,
//! `x.php_old`, `x.php.tar.gz`. The marks ([`COPY_SUFFIXES`]) are those leak scanners
//! probe for: nikto's and OWASP WSTG-CONF-04's ("Review Old Backup and Unreferenced Files":
//! `.old`, `.bak`, `~`, `.orig`, ..., and archives), the backup extensions of common
//! backup-finder lists (`.backup`, `.bkp`, `.bck`, `.copy`, `.tmp`, `.temp`, `.sav`,
//! `.swp`/`.swo`/`.swn`, numbered `.1`), and the files the editors on this machine's
//! packages write: vim (`.swp`/`.swo`/`.swn`/`.swx` swap, `~` backup, `.un~` undo), Emacs
//! (`~`, `.~N~`, `#x#`), nano (`.save`, `.save.N`), patch and git (`.orig`, `.rej`), GNU
//! `cp --backup` (`~`, `.~N~`), package managers' `.dist` / `.dpkg-old` / `.rpmsave`.
//! A copy is never run by PHP-FPM (its extension is not `.php`) and holds the script's
//! source. A name with `php` elsewhere stays an ordinary file: `php.ini.txt`, `php/`,
//! `notes.php.txt` and `x.php.html` (`.txt` and `.html` are how a source is published on
//! purpose, as text or as a page, not marks of a copy), `x.phpx`.

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

/// The marks of a copy after a PHP extension, lower case, without the dot; a mark may also
/// end in digits (`.bak2`, `.save.1`) or be digits alone (`.1`), and tildes around it are
/// part of it (`x.php~`, `x.php.~1~`, `x.php.un~`). Archives and compressed copies
/// included: a `.gz` next to `x.php` is never its precompressed sibling to send.
pub const COPY_SUFFIXES: &[&str] = &[
    // Backups and saved copies (OWASP WSTG-CONF-04, nikto, backup-finder lists).
    "bak",
    "bac",
    "back",
    "backup",
    "bck",
    "bk",
    "bkp",
    "old",
    "orig",
    "original",
    "save",
    "sav",
    "saved",
    "copy",
    "tmp",
    "temp",
    "dist",
    "default",
    "sample",
    "rej",
    "prev",
    // Editors' swap and undo files (vim `.x.php.swp`, `.x.php.un~`).
    "swp",
    "swo",
    "swn",
    "swx",
    "un",
    // Package managers' kept configuration.
    "dpkg-old",
    "dpkg-dist",
    "dpkg-new",
    "dpkg-bak",
    "rpmsave",
    "rpmnew",
    "rpmorig",
    "ucf-old",
    "ucf-dist",
    // Compressed copies and archives.
    "gz",
    "br",
    "zst",
    "bz2",
    "xz",
    "lz",
    "lzma",
    "lz4",
    "z",
    "zip",
    "tar",
    "tgz",
    "tbz",
    "7z",
    "rar",
];

/// How many marks are taken off a name before giving up (`x.php.bak.tar.gz` is three).
const MAX_MARKS: usize = 8;

/// Whether the file name `name` (one decoded path segment) is a copy of a PHP script: a PHP
/// extension followed by marks of [`COPY_SUFFIXES`] (`x.php.bak`, `x.php~`, `#x.php#`,
/// `x.php.tar.gz`, `x.PHP.BAK`), or by `_` / `-` / a space and anything (`x.php_old`,
/// `x.php-2024`, `x.php (copy)`). The script itself is not its own copy.
pub fn is_php_copy(name: &str) -> bool {
    if let Some(inner) = name.strip_prefix('#').and_then(|n| n.strip_suffix('#'))
        && (is_php_name(inner) || is_php_copy(inner))
    {
        return true;
    }
    let mut rest = name;
    for _ in 0..MAX_MARKS {
        let Some(stem) = without_mark(rest) else {
            return false;
        };
        if is_php_name(stem) {
            return true;
        }
        rest = stem;
    }
    false
}

/// `name` without its last mark of a copy, if it ends in one.
fn without_mark(name: &str) -> Option<&str> {
    let trimmed = name.trim_end_matches('~');
    if trimmed.len() < name.len() && is_php_name(trimmed) {
        return Some(trimmed); // `x.php~`
    }
    let (stem, ext) = trimmed.rsplit_once('.')?;
    // `x.php_old`, `x.php-2024`, `x.php (copy)`: an extension that is a PHP one followed by
    // a separator.
    if let Some((php, _)) = ext.split_once(['_', '-', ' '])
        && PHP_EXTENSIONS.iter().any(|p| php.eq_ignore_ascii_case(p))
    {
        return Some(&trimmed[..stem.len() + 1 + php.len()]);
    }
    let mark = ext
        .trim_matches('~')
        .trim_end_matches(|c: char| c.is_ascii_digit());
    // Digits or tildes alone (`x.php.1`, `x.php.~2~`), or nothing (`x.php.`) count too.
    let is_mark = mark.is_empty() || COPY_SUFFIXES.iter().any(|s| mark.eq_ignore_ascii_case(s));
    is_mark.then_some(stem)
}

/// Whether some segment of `path` (split at `/`, each segment's `%XX` escapes decoded) has a
/// PHP extension: `/a.php/b`, `/x%2ePhTmL`. An escape that is not one is kept as written.
pub fn names_php(path: &str) -> bool {
    path.split('/').any(|segment| is_php_name(&decode(segment)))
}

/// Whether a segment of `path` (escaped or not) is named like a copy of a PHP script
/// (`index.php.bak`, `wp-config.php~`, `#x.php#`: [`is_php_copy`]).
pub fn names_php_copy(path: &str) -> bool {
    path.split('/').any(|segment| is_php_copy(&decode(segment)))
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
    fn copies_of_scripts_are_told_from_the_scripts_and_from_other_names() {
        for name in [
            "wp-config.php~",
            "wp-config.php~~",
            "#wp-config.php#",
            "x.php.bak",
            "x.PHP.BAK",
            "x.php.bak2",
            "x.php.old",
            "x.php.orig",
            "x.php.save",
            "x.php.save.1",
            "x.php.1",
            "x.php.~1~",
            ".x.php.swp",
            ".x.php.swo",
            "x.php.swp",
            ".x.php.un~",
            "x.php.tmp",
            "x.php.dist",
            "x.php.dpkg-old",
            "x.php.gz",
            "x.php.br",
            "x.php.zst",
            "x.php.zip",
            "x.php.tar.gz",
            "x.php.bak.gz",
            "x.phtml.bak",
            "a.php5~",
            "x.php_old",
            "x.php-2024-01-01",
            "x.php (copy)",
            "x.php.",
            ".php.bak",
        ] {
            assert!(is_php_copy(name), "{name}");
            assert!(!is_php_name(name), "{name}");
        }
        for name in [
            "x.php",
            "x.phtml",
            "a.php5",
            "php.ini.txt",
            "php.bak",
            "notes.php.txt",
            "x.php.html",
            "x.phpx",
            "x.php2.bak",
            "style.css.gz",
            "x.bak",
            "1.2.3",
            "php-fpm.conf",
            "x.php-fpm.conf",
            "x.php.bak.txt",
            "#notes#",
            "~",
            "",
        ] {
            assert!(!is_php_copy(name), "{name}");
        }
        // A long run of marks is bounded, whatever it holds.
        assert!(!is_php_copy(&format!(
            "x.php{}",
            ".bak".repeat(MAX_MARKS + 1)
        )));
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
