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

mod draft;
mod keys;
mod words;

use super::locate::{self, ConfigError};
use super::settings::{self, Kind, SECTIONS};
use draft::{Draft, Edit};
use keys::{missing_key, unknown_key};
use words::*;

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

#[cfg(test)]
mod tests;
