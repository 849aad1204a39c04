//! The `Content-Type` of a file by its extension: the operator's `mime_types` first, then
//! Shellac's own corrections, then mime_guess's table (kept up to date with the IANA registry
//! and browsers), else `default_type`.

use std::collections::HashMap;

use http::HeaderValue;

/// Where mime_guess 2.0.5 disagrees with what browsers and RFC 9239 want.
const CORRECTIONS: &[(&str, &str)] = &[("mjs", "text/javascript")];

/// The types of one files origin.
pub(crate) struct Types {
    /// Extension (lower-case) → type: the operator's map over the corrections.
    own: HashMap<String, HeaderValue>,
    default: HeaderValue,
}

impl Types {
    /// Values were checked with the configuration; one that is not a field value is skipped.
    pub fn new(overrides: &std::collections::BTreeMap<String, String>, default: &str) -> Types {
        let mut own = HashMap::new();
        for (ext, ty) in CORRECTIONS {
            own.insert((*ext).to_string(), HeaderValue::from_static(ty));
        }
        for (ext, ty) in overrides {
            if let Ok(v) = HeaderValue::from_str(ty) {
                own.insert(ext.to_ascii_lowercase(), v);
            }
        }
        Types {
            own,
            default: HeaderValue::from_str(default)
                .unwrap_or(HeaderValue::from_static("application/octet-stream")),
        }
    }

    /// The type of a file named `name`.
    pub fn of(&self, name: &str) -> HeaderValue {
        let Some((_, ext)) = name.rsplit_once('.') else {
            return self.default.clone();
        };
        let ext = ext.to_ascii_lowercase();
        if let Some(v) = self.own.get(&ext) {
            return v.clone();
        }
        mime_guess::from_ext(&ext)
            .first_raw()
            .map(HeaderValue::from_static)
            .unwrap_or_else(|| self.default.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned: what browsers need for scripts, modules, WebAssembly, SVG, JSON and fonts. A
    /// new mime_guess that changes one of these fails here first.
    #[test]
    fn the_types_browsers_insist_on() {
        let types = Types::new(&Default::default(), "application/octet-stream");
        for (name, want) in [
            ("app.js", "text/javascript"),
            ("mod.mjs", "text/javascript"),
            ("x.wasm", "application/wasm"),
            ("logo.svg", "image/svg+xml"),
            ("data.json", "application/json"),
            ("font.woff2", "font/woff2"),
            ("INDEX.HTML", "text/html"),
            ("style.css", "text/css"),
            ("README", "application/octet-stream"),
            ("x.unknownext", "application/octet-stream"),
        ] {
            assert_eq!(types.of(name), want, "{name}");
        }
    }

    #[test]
    fn the_operator_map_wins() {
        let map = [
            ("js".to_string(), "application/javascript".to_string()),
            ("LOG".to_string(), "text/plain; charset=utf-8".to_string()),
        ]
        .into_iter()
        .collect();
        let types = Types::new(&map, "text/plain");
        assert_eq!(types.of("a.js"), "application/javascript");
        assert_eq!(types.of("a.log"), "text/plain; charset=utf-8");
        assert_eq!(types.of("noext"), "text/plain");
    }
}
