//! Reading a config file past its errors, so one `shellac check` reports all of them, each in
//! an operator's words.
//!
//! After each error the draft is repaired just enough to go on, and parsing starts again:
//! a value of the wrong kind is replaced by the setting's default (or example), a key nobody
//! knows is commented out, a table nobody knows is commented out with its keys, a missing
//! required key is filled in. The keys touched are remembered, so checks of the repaired
//! configuration do not report consequences of the repair (a required key that was only
//! misspelled, a range check on a stand-in value). serde's words ("invalid type: string,
//! expected u16") become the setting's ("expected a port number (1-65535), found \"80\""),
//! and an unknown key or word gets the closest known one ("did you mean").

use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::de::DeTable;

use super::locate::{self, ConfigError};
use super::settings::{self, Kind, SECTIONS, Setting};

/// What reading a file gave.
pub(super) struct Recovered<T> {
    /// The configuration, as repaired; `None` when the file could not be read to the end.
    pub value: Option<T>,
    pub errors: Vec<ConfigError>,
    /// Key paths whose value was stood in for (replaced, or filled in) to go on.
    pub stood_in: Vec<Vec<String>>,
    /// Key paths (or tables) removed to go on: keys and tables nobody knows.
    pub removed: Vec<Vec<String>>,
    /// The text as repaired (checks of `value` are located in it), and the line of the
    /// original each of its lines was (1-based).
    pub text: String,
    pub lines: Vec<usize>,
}

impl<T> Recovered<T> {
    /// `e`, located in the repaired text, moved to its line in the original.
    pub fn to_original(&self, mut e: ConfigError) -> ConfigError {
        if e.line > 0 {
            e.line = self.lines.get(e.line - 1).copied().unwrap_or(e.line);
        }
        e
    }
}

/// A repair to the draft.
enum Edit {
    /// Comment out these lines (0-based, end exclusive).
    CommentLines(Range<usize>),
    /// Replace these bytes (on one line, or keeping the line count).
    Replace(Range<usize>, String),
    /// Add a line after this one (0-based).
    LineAfter(usize, String),
    /// Add a line before this one (0-based).
    LineBefore(usize, String),
}

/// The text being repaired, and where each of its lines was in the original.
struct Draft {
    src: String,
    /// Original (1-based) line number of each line of `src`.
    lines: Vec<usize>,
}

impl Draft {
    fn new(text: &str) -> Draft {
        Draft {
            src: text.to_string(),
            lines: (1..=text.split('\n').count()).collect(),
        }
    }

    /// Line (in the original) and column of `offset`.
    fn position(&self, offset: usize) -> (usize, usize) {
        let (line, column) = locate::line_col(&self.src, offset);
        (self.lines.get(line - 1).copied().unwrap_or(line), column)
    }

    /// The 0-based line holding `offset`, and that line's byte range.
    fn line_of(&self, offset: usize) -> (usize, Range<usize>) {
        let offset = offset.min(self.src.len());
        let start = self.src[..offset].rfind('\n').map_or(0, |i| i + 1);
        let end = self.src[offset..]
            .find('\n')
            .map_or(self.src.len(), |i| offset + i);
        (self.src[..start].matches('\n').count(), start..end)
    }

    fn line_starts(&self) -> Vec<usize> {
        std::iter::once(0)
            .chain(self.src.match_indices('\n').map(|(i, _)| i + 1))
            .collect()
    }

    fn apply(&mut self, edit: Edit) {
        match edit {
            Edit::CommentLines(lines) => {
                let starts = self.line_starts();
                for line in lines.rev() {
                    if let Some(&at) = starts.get(line) {
                        self.src.insert_str(at, "# ");
                    }
                }
            }
            Edit::Replace(range, text) => {
                // Keep the line count, so later lines keep their numbers.
                let newlines = self.src[range.clone()].matches('\n').count();
                self.src
                    .replace_range(range, &format!("{text}{}", "\n".repeat(newlines)));
            }
            Edit::LineBefore(line, text) => {
                let starts = self.line_starts();
                let at = starts.get(line).copied().unwrap_or(self.src.len());
                let text = if at == self.src.len() && !self.src.ends_with('\n') {
                    format!("\n{text}")
                } else {
                    format!("{text}\n")
                };
                self.src.insert_str(at, &text);
                let original = self.lines.get(line).copied().unwrap_or(0);
                self.lines.insert(line.min(self.lines.len()), original);
            }
            Edit::LineAfter(line, text) => {
                let starts = self.line_starts();
                let at = starts.get(line + 1).copied().unwrap_or(self.src.len());
                let text = if at == self.src.len() && !self.src.ends_with('\n') {
                    format!("\n{text}")
                } else {
                    format!("{text}\n")
                };
                self.src.insert_str(at, &text);
                let original = self.lines.get(line).copied().unwrap_or(0);
                self.lines
                    .insert((line + 1).min(self.lines.len()), original);
            }
        }
    }
}

/// Deserializes `text`, reporting every error it can reach.
pub(super) fn deserialize<T: DeserializeOwned>(text: &str, file: &str) -> Recovered<T> {
    let mut draft = Draft::new(text);
    let mut errors: Vec<ConfigError> = Vec::new();
    let (mut stood_in, mut removed) = (Vec::new(), Vec::new());
    let error = |line, column, key: &[String], message: String| ConfigError {
        file: file.to_string(),
        line,
        column,
        key: key.join("."),
        message,
    };
    for (line, key, message, edit) in array_headers(&draft) {
        errors.push(error(line + 1, 1, &key, message));
        draft.apply(edit);
    }
    for _ in 0..64 {
        let e = match toml::from_str::<T>(&draft.src) {
            Ok(value) => {
                errors.sort_by_key(|e| (e.line, e.column));
                return Recovered {
                    value: Some(value),
                    errors,
                    stood_in,
                    removed,
                    text: draft.src,
                    lines: draft.lines,
                };
            }
            Err(e) => e,
        };
        let message = e.message().trim().to_string();
        let Some(span) = e.span() else {
            errors.push(error(0, 0, &[], message));
            break;
        };
        let (line, column) = draft.position(span.start);
        let Ok(doc) = DeTable::parse(&draft.src) else {
            // TOML syntax: nothing after it can be read reliably.
            errors.push(error(line, column, &[], message));
            break;
        };
        let path = locate::path_at(doc.get_ref(), span.start);
        let (key, message, edit) = understand(&message, &path, doc.get_ref(), &draft, span);
        let repeated = errors
            .last()
            .is_some_and(|last| last.line == line && last.message == message);
        if repeated {
            break;
        }
        errors.push(error(line, column, &key, message));
        match &edit {
            Some(Edit::CommentLines(_)) => removed.push(key),
            Some(Edit::Replace(_, text)) if text.is_empty() => removed.push(key),
            _ => stood_in.push(key),
        }
        let Some(edit) = edit else { break };
        draft.apply(edit);
        if DeTable::parse(&draft.src).is_err() {
            break;
        }
    }
    errors.sort_by_key(|e| (e.line, e.column));
    Recovered {
        value: None,
        errors,
        stood_in,
        removed,
        text: draft.src,
        lines: draft.lines,
    }
}

/// Table headers of arrays of tables written as one table (`[backend]`, `[tls.certificate]`),
/// and `[[tls.certificate]]` with no `[[tls]]` above it to belong to: (0-based line, key,
/// message, repair), last line first so each repair leaves the lines of the others in place.
/// serde would only say "invalid type: map, expected a sequence" about the first of them, and
/// stop.
fn array_headers(draft: &Draft) -> Vec<(usize, Vec<String>, String, Edit)> {
    let mut out = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut in_string = false;
    let starts = draft.line_starts();
    for (line, text) in draft.src.split('\n').enumerate() {
        // A multi-line string's lines are not headers.
        let quotes = text.matches("\"\"\"").count() + text.matches("\'\'\'").count();
        if in_string || quotes % 2 == 1 {
            in_string ^= quotes % 2 == 1;
            continue;
        }
        let code = text.split('#').next().unwrap_or(text).trim();
        let (double, inner) = match (code.strip_prefix("[["), code.strip_prefix('[')) {
            (Some(rest), _) => (true, rest.strip_suffix("]]")),
            (None, Some(rest)) => (false, rest.strip_suffix(']')),
            _ => continue,
        };
        let Some(inner) = inner else { continue };
        let name: String = inner
            .split('.')
            .map(|p| p.trim().trim_matches(['"', '\'']))
            .collect::<Vec<_>>()
            .join(".");
        let Some(section) = SECTIONS.iter().find(|s| s.name == name) else {
            continue;
        };
        let key: Vec<String> = name.split('.').map(str::to_string).collect();
        let at = starts.get(line).copied().unwrap_or(0);
        if section.array
            && let Some((parent, _)) = name.rsplit_once('.')
            && !seen.iter().any(|s| s == parent)
            && SECTIONS.iter().any(|s| s.name == parent && s.array)
        {
            out.push((
                line,
                key.clone(),
                format!(
                    "`[[{name}]]` belongs to the `[[{parent}]]` above it, and there is none: write `[[{parent}]]` (with its settings) above this line"
                ),
                Edit::LineBefore(line, format!("[[{parent}]]")),
            ));
            seen.push(parent.to_string());
        }
        if section.array && !double {
            let indent = text.len() - text.trim_start().len();
            let end = at + indent + code.len();
            out.push((
                line,
                key,
                format!(
                    "write `[[{name}]]` (an array of tables: one `[[{name}]]` header for each), not `[{name}]`"
                ),
                Edit::Replace(at + indent..end, format!("[[{name}]]")),
            ));
        }
        if section.array {
            seen.push(name);
        }
    }
    out.reverse();
    out
}

/// The key an error is about, the error in an operator's words, and the repair that gets past
/// it (None: stop here).
fn understand(
    message: &str,
    path: &[String],
    doc: &DeTable<'_>,
    draft: &Draft,
    span: Range<usize>,
) -> (Vec<String>, String, Option<Edit>) {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (name, expected) = rest.split_once('`').unwrap_or((rest, ""));
        return unknown_key(name, &quoted(expected), path, doc, draft, span);
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or(rest);
        return missing_key(name, path, draft, span);
    }
    let Some((setting, depth)) = settings::for_path(path) else {
        // Not a setting (cannot happen for a complete table): drop its line if it has one.
        let (line, range) = draft.line_of(span.start);
        let edit = draft.src[range]
            .contains('=')
            .then_some(Edit::CommentLines(line..line + 1));
        return (path.to_vec(), message.to_string(), edit);
    };
    let key = path[..depth].to_vec();
    let value = locate::spans_of(doc, &key).map(|(_, v)| v);
    let inside = value
        .as_ref()
        .is_some_and(|v| span.start > v.start && span.end <= v.end);
    let words = match setting.kind {
        Kind::Addresses if not_an_address(message) => {
            super::addresses::not_an_address(&draft.src[span.clone()])
        }
        Kind::Listeners | Kind::ClientListeners if message == "invalid socket address syntax" => {
            super::addresses::not_an_address(&draft.src[span.clone()])
        }
        Kind::AdminAddress if not_an_address(message) => format!(
            "{}; or \"off\" for no admin listener",
            super::addresses::not_an_address(&draft.src[span.clone()])
        ),
        _ => operator_words(message, &setting.kind, inside),
    };
    let edit = match (value, setting.sample()) {
        (Some(v), sample) if !sample.is_empty() => Some(Edit::Replace(v, sample.to_string())),
        _ => {
            let (line, _) = draft.line_of(span.start);
            Some(Edit::CommentLines(line..line + 1))
        }
    };
    (key, words, edit)
}

/// The words inside backquotes in serde's "expected one of `a`, `b`".
fn quoted(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// How a table is named in messages: `[server]`, `[[backend]]`, `synth`.
fn title(table: &[String]) -> String {
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

fn unknown_key(
    name: &str,
    expected: &[String],
    path: &[String],
    doc: &DeTable<'_>,
    draft: &Draft,
    span: Range<usize>,
) -> (Vec<String>, String, Option<Edit>) {
    let table = &path[..path.len().saturating_sub(1)];
    let (line, range) = draft.line_of(span.start);
    let text = draft.src[range].trim_start();
    if text.starts_with('[') {
        // A table nobody knows: comment it out with its keys, up to the next table.
        let starts = draft.line_starts();
        let end = (line + 1..starts.len())
            .find(|&l| {
                let next = starts.get(l + 1).copied().unwrap_or(draft.src.len());
                draft.src[starts[l]..next].trim_start().starts_with('[')
            })
            .unwrap_or(starts.len());
        let header = text.split('#').next().unwrap_or(text).trim_end();
        let suggestion = closest(name, expected.iter().map(String::as_str))
            .map(|s| {
                let full: Vec<&str> = table.iter().map(String::as_str).chain([s]).collect();
                full.join(".")
            })
            .or_else(|| table_elsewhere(name))
            .map(|full| match SECTIONS.iter().find(|x| x.name == full) {
                Some(x) if x.array => format!("; did you mean `[[{full}]]`?"),
                _ => format!("; did you mean `[{full}]`?"),
            });
        let message = format!(
            "unknown table `{header}`{}",
            suggestion.unwrap_or_else(|| format!(" (tables here: {})", expected.join(", ")))
        );
        return (path.to_vec(), message, Some(Edit::CommentLines(line..end)));
    }
    let section = section_of(table);
    let mut keys: Vec<&str> = expected.iter().map(String::as_str).collect();
    for s in settings::of(&section) {
        if !keys.contains(&s.key) {
            keys.push(s.key);
        }
    }
    let message = match closest(name, keys.iter().copied()) {
        Some(s) => format!(
            "unknown key `{name}` in {}; did you mean `{s}`?",
            title(table)
        ),
        None => match elsewhere(name, &section) {
            Some(hint) => format!("unknown key `{name}` in {}; {hint}", title(table)),
            None if keys.is_empty() => format!("unknown key `{name}` in {}", title(table)),
            None => format!(
                "unknown key `{name}` in {} (its keys: {})",
                title(table),
                keys.join(", ")
            ),
        },
    };
    let bare = text.trim_start_matches(['"', '\'']);
    let edit = if bare.starts_with(name) {
        Some(Edit::CommentLines(line..line + 1))
    } else {
        // Inside an inline table: remove `name = value` and a comma next to it.
        locate::spans_of(doc, path).map(|(k, v)| {
            let after = &draft.src[v.end..];
            let trailing = after.len() - after.trim_start_matches([' ', '\t']).len();
            let end = if after[trailing..].starts_with(',') {
                v.end + trailing + 1
            } else {
                v.end
            };
            let before = draft.src[..k.start].trim_end_matches([' ', '\t']);
            let start = if end == v.end && before.ends_with(',') {
                before.len() - 1
            } else {
                k.start
            };
            Edit::Replace(start..end, String::new())
        })
    };
    (path.to_vec(), message, edit)
}

/// The section a table path is (`backend.0.probe` → `backend.probe`).
fn section_of(table: &[String]) -> String {
    let named: Vec<&str> = table
        .iter()
        .map(String::as_str)
        .filter(|p| !p.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    named.join(".")
}

/// Words other proxies (and other tables of this file) use for a setting: (word, section, key).
const ALIASES: &[(&str, &str, &str)] = &[
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
fn elsewhere(name: &str, section: &str) -> Option<String> {
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
fn table_elsewhere(name: &str) -> Option<String> {
    let last = |s: &'static str| s.rsplit('.').next().unwrap_or(s);
    let tables = SECTIONS.iter().filter(|s| !s.inline);
    closest(name, tables.map(|s| last(s.name))).and_then(|end| {
        SECTIONS
            .iter()
            .find(|s| !s.inline && last(s.name) == end)
            .map(|s| s.name.to_string())
    })
}

fn missing_key(
    name: &str,
    table: &[String],
    draft: &Draft,
    span: Range<usize>,
) -> (Vec<String>, String, Option<Edit>) {
    let mut key = table.to_vec();
    key.push(name.to_string());
    let setting = settings::for_path(&key).map(|(s, _)| s);
    let what = setting.map_or_else(String::new, |s| format!(" ({})", s.kind.phrase()));
    let message = format!("`{name}` is required in {}{what}", title(table));
    let sample = setting.map(|s| s.sample()).unwrap_or_default();
    if sample.is_empty() {
        return (key, message, None);
    }
    let edit = if draft.src[span.start..].starts_with('{') {
        let inner = draft.src[span.start + 1..].trim_start();
        let sep = if inner.starts_with('}') { " " } else { ", " };
        Edit::Replace(
            span.start..span.start + 1,
            format!("{{ {name} = {sample}{sep}"),
        )
    } else {
        let (line, _) = draft.line_of(span.start);
        Edit::LineAfter(line, format!("{name} = {sample}"))
    };
    (key, message, Some(edit))
}

/// serde's message about a value, in the words of the setting's kind.
fn operator_words(message: &str, kind: &Kind, inside_list: bool) -> String {
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
fn not_an_address(message: &str) -> bool {
    message == "invalid socket address syntax" || message.starts_with("invalid type: integer")
}

/// What one element of a list kind is.
fn element_phrase(kind: &Kind) -> Option<String> {
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
fn found_words(found: &str) -> String {
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
fn distance(a: &str, b: &str) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading on past errors edits the text; no edit of any text may panic, and every error
    /// points into the file. Deterministic mutations of the examples (the fuzz target explores
    /// further).
    #[test]
    fn mutated_examples_never_panic_and_errors_point_into_the_file() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
        let mut texts = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                texts.push(std::fs::read_to_string(path).unwrap());
            }
        }
        let pieces = [
            "[",
            "]",
            "=",
            "\"",
            "{",
            "}",
            "\n",
            "[[backend]]\n",
            "x = ",
            ",",
            "#",
            "\u{e9}",
            "\u{feff}",
            "[storage.disk]\n",
            "1e99",
            "-1",
            "\"off\"",
            "[]",
            "{ url = 5 }",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1) as u64) as usize
        };
        for round in 0..400 {
            let mut text = texts[round % texts.len()].clone();
            for _ in 0..1 + next(4) {
                let mut at = next(text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                if next(2) == 0 {
                    text.insert_str(at, pieces[next(pieces.len())]);
                } else {
                    let mut end = (at + next(12)).min(text.len());
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.replace_range(at..end, "");
                }
            }
            let lines = text.split('\n').count();
            if let Err(errors) = crate::config::Config::parse(&text, "m.toml") {
                assert!(!errors.is_empty());
                for e in errors {
                    assert!(e.line <= lines, "{e:?} in:\n{text}");
                }
            }
        }
    }

    #[test]
    fn did_you_mean() {
        let keys = ["idle_timeout", "idle_release", "listen", "admin"];
        assert_eq!(
            closest("idle_timout", keys.into_iter()),
            Some("idle_timeout")
        );
        assert_eq!(closest("Listen", keys.into_iter()), Some("listen"));
        assert_eq!(
            closest("idle-release", keys.into_iter()),
            Some("idle_release")
        );
        assert_eq!(closest("threads", keys.into_iter()), None);
        assert_eq!(distance("kitten", "sitting"), 3);
        // A swap of two neighbouring letters is one typo (issue 32: `paht` had no suggestion).
        let rule = ["name", "host", "path", "url", "ttl"];
        assert_eq!(closest("paht", rule.into_iter()), Some("path"));
        assert_eq!(closest("nmae", rule.into_iter()), Some("name"));
        assert_eq!(distance("ab", "ba"), 1);
    }
}
