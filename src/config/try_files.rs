//! `[[backend]] try_files` (nginx's `try_files`): the entries read once into [`TryFiles`],
//! and the checks `shellac check` reports with file:line:key — an entry that is not a path,
//! an unknown variable, a fallback backend that does not exist or is the backend itself, a
//! setting of the files kind on another kind.

use super::{BackendConfig, BackendProtocol, Config};

/// The only variable an entry may hold: the request's path, as the client sent it.
pub const URI: &str = "$uri";

/// What is done when no entry names a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// `=CODE`: answer that status.
    Status(u16),
    /// `@NAME`: the request as it came, to that backend or director.
    Backend(String),
    /// A path (with `$uri` in it or not): that file from the root, else 404.
    Path(String),
}

/// A backend's `try_files`, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TryFiles {
    /// Paths tried in order, `$uri` not yet replaced; one ending in `/` names a directory.
    pub paths: Vec<String>,
    pub fallback: Fallback,
}

impl TryFiles {
    /// Reads the entries; `None` for an empty list (no `try_files`).
    pub fn parse(entries: &[String]) -> Result<Option<TryFiles>, String> {
        let Some((last, paths)) = entries.split_last() else {
            return Ok(None);
        };
        if paths.is_empty() {
            return Err(
                "try_files needs at least one path to try and a last entry (`=404`, `@backend` or a path), as nginx's".into(),
            );
        }
        for p in paths {
            check_path(p)?;
        }
        let fallback = if let Some(code) = last.strip_prefix('=') {
            match code.parse::<u16>() {
                Ok(c) if (200..=599).contains(&c) => Fallback::Status(c),
                _ => {
                    return Err(format!(
                        "`{last}`: `=` is followed by a status, 200-599 (`=404`)"
                    ));
                }
            }
        } else if let Some(name) = last.strip_prefix('@') {
            if name.is_empty() {
                return Err("`@` is followed by a backend or director name (`@php`)".into());
            }
            Fallback::Backend(name.to_string())
        } else {
            check_path(last)?;
            Fallback::Path(last.clone())
        };
        Ok(Some(TryFiles {
            paths: paths.to_vec(),
            fallback,
        }))
    }
}

/// A path entry: starts with `/` or `$uri`, holds no other `$` variable.
fn check_path(p: &str) -> Result<(), String> {
    if !(p.starts_with('/') || p.starts_with(URI)) {
        return Err(format!(
            "`{p}` is not a path: start it with `/` or `$uri` (or, last, write `=CODE` or `@NAME`)"
        ));
    }
    if p.replace(URI, "").contains('$') {
        return Err(format!(
            "`{p}`: `$uri` is the only variable known in try_files"
        ));
    }
    if p.contains(['?', '#']) {
        return Err(format!(
            "`{p}`: a file path has no query (the request's is kept)"
        ));
    }
    if crate::fastcgi::php::names_php(p) {
        return Err(format!(
            "`{p}` names a PHP script (.php, .phtml, .phar, ...: any case), which a files backend never sends (it answers 404): end the list with `@NAME`, the FastCGI backend (it runs `/index.php` for a path that is no file, as nginx's `try_files ... /index.php?$args` does)"
        ));
    }
    if crate::fastcgi::php::names_php_copy(p) {
        return Err(format!(
            "`{p}` names a copy of a PHP script (.php.bak, .php~, .php.save, ...), which a files backend never sends (it answers 404): name the file the copy was made from, or remove the entry"
        ));
    }
    Ok(())
}

fn at(i: usize, key: &str) -> Vec<String> {
    vec!["backend".into(), i.to_string(), key.into()]
}

/// The problems of every backend's `try_files`, `autoindex` and `sniff_scripts`.
pub(super) fn validate(c: &Config) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for (i, b) in c.backends.iter().enumerate() {
        out.extend(validate_one(c, i, b));
    }
    out
}

fn validate_one(c: &Config, i: usize, b: &BackendConfig) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let files = b.protocol == BackendProtocol::Files;
    if !files && !b.try_files.is_empty() {
        out.push((
            at(i, "try_files"),
            "only `protocol = \"files\"` tries files".into(),
        ));
    }
    if !files && !b.sniff_scripts {
        out.push((
            at(i, "sniff_scripts"),
            "only `protocol = \"files\"` reads files for PHP source".into(),
        ));
    }
    if !files && b.autoindex {
        out.push((
            at(i, "autoindex"),
            "only `protocol = \"files\"` lists directories".into(),
        ));
    }
    match TryFiles::parse(&b.try_files) {
        Err(e) => out.push((at(i, "try_files"), e)),
        Ok(Some(TryFiles {
            fallback: Fallback::Backend(name),
            ..
        })) => {
            let known = c.backends.iter().any(|o| o.name == name)
                || c.directors.iter().any(|d| d.name == name);
            if !known {
                out.push((
                    at(i, "try_files"),
                    format!("no backend or director is named `{name}`"),
                ));
            } else if name == b.name {
                out.push((
                    at(i, "try_files"),
                    format!("`@{name}` is this backend itself"),
                ));
            }
        }
        Ok(_) => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Option<TryFiles>, String> {
        TryFiles::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn entries_are_read_as_nginx_writes_them() {
        assert_eq!(parse(&[]), Ok(None));
        let t = parse(&["$uri", "$uri/", "@php"]).unwrap().unwrap();
        assert_eq!(t.paths, ["$uri", "$uri/"]);
        assert_eq!(t.fallback, Fallback::Backend("php".into()));
        let t = parse(&["$uri", "=404"]).unwrap().unwrap();
        assert_eq!(t.fallback, Fallback::Status(404));
        let t = parse(&["$uri.html", "/index.html"]).unwrap().unwrap();
        assert_eq!(t.fallback, Fallback::Path("/index.html".into()));
        for bad in [
            &["=404"][..],
            &["$uri", "=99"],
            &["$uri", "=x"],
            &["$uri", "@"],
            &["uri", "=404"],
            &["$request_uri", "=404"],
            &["$uri?$args", "=404"],
            // nginx's WordPress `try_files $uri $uri/ /index.php?$args;` without its query:
            // the script would be sent, not run.
            &["$uri", "$uri/", "/index.php"],
            &["$uri", "$uri.php", "@php"],
            // The whole PHP family, any case, escaped or not.
            &["$uri", "$uri.PHTML", "@php"],
            &["$uri", "/index%2ephp", "@php"],
            &["$uri", "/app.phar", "=404"],
            // Copies of one: never sent either.
            &["$uri", "/index.php.bak", "=404"],
            &["$uri", "/wp-config.php~", "@php"],
            &["$uri", "/index%2EPHP.old", "=404"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn check_names_the_key() {
        let text = "[[backend]]\nname = \"static\"\nprotocol = \"files\"\nroot = \"/srv\"\ntry_files = [\"$uri\", \"@nope\"]\n\n[[backend]]\nname = \"self\"\nprotocol = \"files\"\nroot = \"/srv\"\ntry_files = [\"$uri\", \"@self\"]\n\n[[backend]]\nname = \"app\"\nhost = \"a\"\nautoindex = true\nsniff_scripts = false\ntry_files = [\"$uri\", \"=404\"]\n";
        let e = match Config::parse(text, "t.toml") {
            Ok(_) => panic!("accepted"),
            Err(e) => e,
        };
        let got: Vec<String> = e
            .iter()
            .map(|e| format!("{}: {}", e.key, e.message))
            .collect();
        for want in [
            "backend.0.try_files: no backend or director is named `nope`",
            "backend.1.try_files: `@self` is this backend itself",
            "backend.2.try_files: only `protocol = \"files\"` tries files",
            "backend.2.autoindex: only `protocol = \"files\"` lists directories",
            "backend.2.sniff_scripts: only `protocol = \"files\"` reads files for PHP source",
        ] {
            assert!(got.iter().any(|g| g == want), "{want}\n{got:#?}");
        }
    }
}
