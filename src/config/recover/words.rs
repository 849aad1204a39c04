//! The operator's words of a configuration error: a table's title, a value's kind, where a
//! key that is not known here belongs instead, the closest known word to a misspelt one.

use crate::config::settings::{self, Kind, SECTIONS, Setting};

/// The words inside backquotes in serde's "expected one of `a`, `b`".
pub(super) fn quoted(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// How a table is named in messages: `[server]`, `[[backend]]`, `synth`.
pub(super) fn title(table: &[String]) -> String {
    let named: Vec<&str> = table
        .iter()
        .map(String::as_str)
        .filter(|p| !p.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    let name = named.join(".");
    match SECTIONS.iter().find(|s| s.name == name) {
        None if name.is_empty() => "the top level".into(),
        Some(s) if s.array => format!("[[{name}]]"),
        Some(s) if s.inline => format!("`{}`", named.last().unwrap_or(&"")),
        _ if name == "backend.probe" => "`probe`".into(),
        _ => format!("[{name}]"),
    }
}

/// The section a table path is (`backend.0.probe` → `backend.probe`).
pub(super) fn section_of(table: &[String]) -> String {
    let named: Vec<&str> = table
        .iter()
        .map(String::as_str)
        .filter(|p| !p.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    named.join(".")
}

/// Words other proxies (and other tables of this file) use for a setting: (word, section, key).
pub(super) const ALIASES: &[(&str, &str, &str)] = &[
    ("port", "server", "listen"),
    ("bind", "server", "listen"),
    ("address", "server", "listen"),
    ("workers", "server", "threads"),
    ("worker_threads", "server", "threads"),
    ("ttl", "cache", "default_ttl"),
    ("size", "cache", "memory_size"),
    ("max_size", "cache", "memory_size"),
    ("cache_size", "cache", "memory_size"),
    ("timeout", "backend", "first_byte_timeout"),
    ("access_log", "log", "access_log"),
];

/// For a key `section` does not have: the key of another table it is, or is close to, or
/// another proxy's word for ("did you mean `memory_size` in [cache]?").
pub(super) fn elsewhere(name: &str, section: &str) -> Option<String> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let in_title = |section: &str| {
        let path: Vec<String> = section.split('.').map(str::to_string).collect();
        title(&path)
    };
    let others = || settings::all().filter(|s| s.section != section);
    let alias = |here: bool| {
        ALIASES
            .iter()
            .find(|(word, sec, _)| norm(word) == norm(name) && (*sec == section) == here)
    };
    if let Some(&(_, _, key)) = alias(true) {
        return Some(format!("did you mean `{key}`?"));
    }
    if let Some(s) = others().find(|s| norm(s.key) == norm(name)) {
        return Some(format!(
            "`{}` is a key of {}: did you mean to write it there?",
            s.key,
            in_title(s.section)
        ));
    }
    if let Some(&(_, sec, key)) = alias(false) {
        return Some(format!("did you mean `{key}` in {}?", in_title(sec)));
    }
    let keys: Vec<&'static Setting> = others().collect();
    let near = closest(name, keys.iter().map(|s| s.key))?;
    let s = keys.iter().find(|s| s.key == near)?;
    Some(format!(
        "did you mean `{}` in {}?",
        s.key,
        in_title(s.section)
    ))
}

/// The section an unknown table's last name is the end of, or close to (`[disk]` →
/// `storage.disk`).
pub(super) fn table_elsewhere(name: &str) -> Option<String> {
    let last = |s: &'static str| s.rsplit('.').next().unwrap_or(s);
    let tables = SECTIONS.iter().filter(|s| !s.inline);
    closest(name, tables.map(|s| last(s.name))).and_then(|end| {
        SECTIONS
            .iter()
            .find(|s| !s.inline && last(s.name) == end)
            .map(|s| s.name.to_string())
    })
}

/// serde's message about a value, in the words of the setting's kind.
pub(super) fn operator_words(message: &str, kind: &Kind, inside_list: bool) -> String {
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (word, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let expected = quoted(expected);
        let list: Vec<String> = expected.iter().map(|w| format!("\"{w}\"")).collect();
        let hint = closest(word, expected.iter().map(String::as_str))
            .map(|s| format!("; did you mean \"{s}\"?"))
            .unwrap_or_default();
        return format!("\"{word}\" is not one of {}{hint}", list.join(", "));
    }
    let phrase = match (inside_list, element_phrase(kind)) {
        (true, Some(element)) => element,
        _ => kind.phrase(),
    };
    let in_list = if inside_list { " in the list" } else { "" };
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        let found = rest.split(", expected").next().unwrap_or(rest);
        return format!("expected {phrase}, found {}{in_list}", found_words(found));
    }
    if let Some(rest) = message.strip_prefix("invalid value: ") {
        let found = rest.split(", expected").next().unwrap_or(rest);
        return format!("{}{in_list} is not {phrase}", found_words(found));
    }
    if message.starts_with("invalid length") {
        return format!("expected {phrase}");
    }
    // Our own parsers' messages (durations, sizes, addresses) are already in these words.
    message.to_string()
}

/// Whether serde's `message` says a value is no socket address: a string it could not parse,
/// or a number (`listen = 443`).
pub(super) fn not_an_address(message: &str) -> bool {
    message == "invalid socket address syntax" || message.starts_with("invalid type: integer")
}

/// What one element of a list kind is.
pub(super) fn element_phrase(kind: &Kind) -> Option<String> {
    Some(match kind {
        Kind::Addresses | Kind::Listeners | Kind::ClientListeners => {
            "an address such as \"127.0.0.1:6081\"".into()
        }
        Kind::Networks => "a network such as \"10.0.0.0/8\" or \"::1\"".into(),
        Kind::Statuses => "an HTTP status (100-599)".into(),
        Kind::Texts(_) | Kind::FieldTable(_) => "a string".into(),
        _ => return None,
    })
}

/// serde's description of a value (`string "x"`, `integer \`5\``, `sequence`) as it was written.
pub(super) fn found_words(found: &str) -> String {
    let value = |s: &str| s.trim_matches('`').to_string();
    if let Some(s) = found.strip_prefix("string ") {
        return s.to_string();
    }
    for prefix in ["integer ", "floating point ", "boolean "] {
        if let Some(s) = found.strip_prefix(prefix) {
            return value(s);
        }
    }
    match found {
        "sequence" => "a list".into(),
        "map" => "a table".into(),
        other => other.to_string(),
    }
}

/// The known word closest to `word` (edit distance, ignoring case and `-` / `_`), if close
/// enough to be a typo.
pub(super) fn closest<'a>(word: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let w = norm(word);
    let limit = (w.chars().count() / 3).clamp(1, 3);
    known
        .map(|k| (distance(&w, &norm(k)), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Edit distance counting a swap of two neighbouring letters as one edit (optimal string
/// alignment), so `paht` is one typo away from `path`, as `ttll` is from `ttl`.
pub(super) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: the one before the previous (for swaps), the previous, the current.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let substitution = previous[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            let mut d = (previous[j] + 1).min(current[j - 1] + 1).min(substitution);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            current[j] = d;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}
