//! What changed between two validated configurations, setting by setting: both are serialized
//! to a tree (the same `Serialize` that writes a config back, so durations and sizes compare
//! exactly) and the trees are compared key path by key path. No list of settings to keep up
//! to date: a setting added to the model is reported when it changes.
//!
//! Tables in an array (`[[backend]]`, `[[director]]`, `[[probe]]`, `[[rule]]`) are matched by
//! their `name`, so reordering them changes nothing and a backend's port is reported as
//! `backend[app].port`; a name only in one of the two is `added` or `removed` as a whole.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Config;

/// One setting that differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Key path: `server.max_connections`, `backend[app].port`, `director[web]`.
    pub key: String,
    /// The running value (`None`: unset, or the table is new).
    pub old: Option<String>,
    /// The new value (`None`: unset, or the table was removed).
    pub new: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = self.key.ends_with(']');
        match (&self.old, &self.new) {
            (None, Some(_)) if table => write!(f, "{}: added", self.key),
            (Some(_), None) if table => write!(f, "{}: removed", self.key),
            (old, new) => write!(
                f,
                "{}: {} → {}",
                self.key,
                old.as_deref().unwrap_or("unset"),
                new.as_deref().unwrap_or("unset")
            ),
        }
    }
}

/// Every setting whose value differs between `old` and `new`, sorted by key.
pub fn diff(old: &Config, new: &Config) -> Vec<Change> {
    let (a, b) = (flatten(old), flatten(new));
    let mut out = Vec::new();
    for (key, old_value) in &a {
        match b.get(key) {
            Some(new_value) if new_value == old_value => {}
            new_value => out.push(Change {
                key: key.clone(),
                old: Some(old_value.clone()),
                new: new_value.cloned(),
            }),
        }
    }
    for (key, new_value) in &b {
        if !a.contains_key(key) {
            out.push(Change {
                key: key.clone(),
                old: None,
                new: Some(new_value.clone()),
            });
        }
    }
    out.sort_by(|x, y| x.key.cmp(&y.key));
    out
}

/// Key path → value text, for every leaf; a named table in an array is one entry `kind[name]`
/// with its own leaves under it (so an added backend is one entry, found by its prefix).
fn flatten(config: &Config) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    match serde_json::to_value(config) {
        Ok(tree) => walk("", &tree, &mut out),
        // Cannot happen for the config model (every map key is a string); say so in the diff.
        Err(e) => {
            out.insert("(configuration)".into(), format!("not comparable: {e}"));
        }
    }
    collapse_named(out)
}

fn walk(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    let join = |key: &str| {
        if prefix.is_empty() {
            key.to_string()
        } else {
            format!("{prefix}.{key}")
        }
    };
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                walk(&join(k), v, out);
            }
        }
        Value::Array(items) if !items.is_empty() && items.iter().all(named) => {
            for item in items {
                let name = item["name"].as_str().unwrap_or_default();
                walk(&format!("{prefix}[{name}]"), item, out);
            }
        }
        // An unset option is an absent key: set later, it is reported as `unset → value`.
        Value::Null => {}
        leaf => {
            out.insert(prefix.to_string(), leaf.to_string());
        }
    }
}

fn named(item: &Value) -> bool {
    item.get("name").is_some_and(Value::is_string)
}

/// Keeps the leaves of named tables, and adds one `kind[name]` entry per table holding its
/// whole text, so that [`diff`] can tell added and removed tables from changed ones.
fn collapse_named(leaves: BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, value) in &leaves {
        if let Some(end) = key.find(']') {
            tables
                .entry(key[..=end].to_string())
                .or_default()
                .push(format!("{}={value}", &key[end + 1..]));
        }
    }
    let mut out = leaves;
    for (table, parts) in tables {
        out.insert(table, parts.join(" "));
    }
    out
}

/// [`diff`] as the reload reports it: a table added or removed is one line (not one per key),
/// a changed table one line per changed key.
pub fn describe(old: &Config, new: &Config) -> Vec<Change> {
    let all = diff(old, new);
    let whole: Vec<String> = all
        .iter()
        .filter(|c| c.key.ends_with(']') && (c.old.is_none() || c.new.is_none()))
        .map(|c| c.key.clone())
        .collect();
    all.into_iter()
        .filter_map(|mut c| {
            if c.key.ends_with(']') {
                if c.old.is_some() && c.new.is_some() {
                    return None; // Its changed keys are listed.
                }
                // Added or removed: named, without its whole text.
                c.old = c.old.map(|_| String::new());
                c.new = c.new.map(|_| String::new());
                return Some(c);
            }
            let inside_whole = whole.iter().any(|w| c.key.starts_with(w.as_str()));
            (!inside_whole).then_some(c)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(text, "t.toml").unwrap()
    }

    const BASE: &str = "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[backend]]\nname = \"app\"\nhost = \"127.0.0.1\"\nport = 8080\n\n[[director]]\nname = \"web\"\ntype = \"fallback\"\nbackends = [\"app\"]\n";

    fn lines(old: &str, new: &str) -> Vec<String> {
        describe(&parse(old), &parse(new))
            .iter()
            .map(|c| c.to_string())
            .collect()
    }

    /// Issue 23 #4: a reload that changed `max_restarts` or `trusted_proxies` reported
    /// `"changes": []`. Every setting that differs is reported, whatever its section.
    #[test]
    fn every_changed_setting_is_reported() {
        let new = BASE
            .replace(
                "listen = [\"127.0.0.1:0\"]",
                "listen = [\"127.0.0.1:0\"]\ntrusted_proxies = [\"10.0.0.0/8\"]",
            )
            .replace(
                "backends = [\"app\"]",
                "backends = [\"app\"]\nmax_restarts = 2",
            );
        assert_eq!(
            lines(BASE, &new),
            [
                "director[web].max_restarts: 4 → 2",
                "server.trusted_proxies: [] → [\"10.0.0.0/8\"]",
            ]
        );
        assert!(lines(BASE, BASE).is_empty());
    }

    /// Issue 23 #15: sizes and durations compare exactly (the reload compared a rounded
    /// display string, so a small change was neither applied nor refused).
    #[test]
    fn values_compare_exactly() {
        let old = format!("[cache]\nmemory_size = \"256MiB\"\nkeep = \"1h\"\n{BASE}");
        let new = format!("[cache]\nmemory_size = 268435457\nkeep = \"3600.001s\"\n{BASE}");
        assert_eq!(
            lines(&old, &new),
            [
                "cache.keep: \"1h\" → \"3600001ms\"",
                "cache.memory_size: \"256MiB\" → \"268435457B\"",
            ]
        );
        // The same value spelled differently is no change.
        let same = format!("[cache]\nmemory_size = \"0.25GiB\"\nkeep = 3600\n{BASE}");
        assert!(lines(&old, &same).is_empty());
    }

    #[test]
    fn named_tables_are_matched_by_name() {
        let two = format!("{BASE}\n[[backend]]\nname = \"b\"\nhost = \"127.0.0.2\"\n");
        assert_eq!(lines(BASE, &two), ["backend[b]: added"]);
        assert_eq!(lines(&two, BASE), ["backend[b]: removed"]);
        // Reordered: nothing changed.
        let reordered = "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[backend]]\nname = \"b\"\nhost = \"127.0.0.2\"\n\n[[backend]]\nname = \"app\"\nhost = \"127.0.0.1\"\nport = 8080\n\n[[director]]\nname = \"web\"\ntype = \"fallback\"\nbackends = [\"app\"]\n";
        assert!(lines(&two, reordered).is_empty());
        let moved = BASE.replace("port = 8080", "port = 8081\nprobe = { url = \"/health\" }");
        let got = lines(BASE, &moved);
        assert_eq!(got[0], "backend[app].port: 8080 → 8081", "{got:?}");
        assert!(
            got.contains(&"backend[app].probe.url: unset → \"/health\"".to_string()),
            "{got:?}"
        );
        assert!(
            lines(&moved, BASE)
                .contains(&"backend[app].probe.url: \"/health\" → unset".to_string())
        );
    }
}
