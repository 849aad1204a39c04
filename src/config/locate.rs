//! Turning TOML byte offsets into what an operator needs: file, line, column and dotted key.

use std::fmt;

use toml::de::{DeTable, DeValue};

/// One problem in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// 1-based; 0 when the problem has no place in the file (e.g. a missing section).
    pub line: usize,
    pub column: usize,
    /// Dotted key path, e.g. `backend.0.port`; empty when unknown.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.key.is_empty() {
            write!(f, ": `{}`", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Builds an error located at the dotted `path` (deepest existing part of it).
pub fn at_path(text: &str, file: &str, path: &[String], message: String) -> ConfigError {
    let offset = DeTable::parse(text)
        .ok()
        .and_then(|doc| offset_of(doc.get_ref(), path));
    let (line, column) = offset.map(|o| line_col(text, o)).unwrap_or((0, 0));
    ConfigError {
        file: file.to_string(),
        line,
        column,
        key: path.join("."),
        message,
    }
}

pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map(|i| offset - i).unwrap_or(offset + 1);
    (line, column)
}

fn offset_of(table: &DeTable<'_>, path: &[String]) -> Option<usize> {
    let (first, rest) = path.split_first()?;
    let (key, value) = table
        .iter()
        .find(|(k, _)| k.get_ref().as_ref() == first.as_str())?;
    let here = key.span().start;
    Some(value_offset(value.get_ref(), rest).unwrap_or(here))
}

fn value_offset(value: &DeValue<'_>, path: &[String]) -> Option<usize> {
    match value {
        DeValue::Table(t) => offset_of(t, path),
        DeValue::Array(items) => {
            let (index, rest) = path.split_first()?;
            let item = items.get(index.parse::<usize>().ok()?)?;
            Some(value_offset(item.get_ref(), rest).unwrap_or(item.span().start))
        }
        _ => None,
    }
}

/// The key path whose key or value contains `offset`, with array indices (`backend.1.port`);
/// a table header (`[[backend]]`, `[storage.disk]`) gives the path of its table.
pub(super) fn path_at(doc: &DeTable<'_>, offset: usize) -> Vec<String> {
    let mut path = Vec::new();
    walk_table(doc, offset, &mut path);
    path
}

fn walk_table(table: &DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    for (key, value) in table.iter() {
        let in_key = key.span().contains(&offset);
        let in_value = value.span().contains(&offset) || value.span().start == offset;
        if in_key || in_value {
            path.push(key.get_ref().to_string());
            if in_value {
                walk_value(value.get_ref(), offset, path);
            }
            return true;
        }
    }
    // Tables declared with headers may not have spans covering their keys; search inside.
    for (key, value) in table.iter() {
        path.push(key.get_ref().to_string());
        if walk_value(value.get_ref(), offset, path) {
            return true;
        }
        path.pop();
    }
    false
}

fn walk_value(value: &DeValue<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    match value {
        DeValue::Table(t) => walk_table(t, offset, path),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                // An array of tables' item spans its header.
                let here = item.span().contains(&offset) || item.span().start == offset;
                if walk_value(item.get_ref(), offset, path) || here {
                    return true;
                }
                path.pop();
            }
            false
        }
        _ => false,
    }
}

/// The spans of the key at `path` and of its value (the deepest part of `path` that exists
/// must be the whole of it).
pub(super) fn spans_of(
    doc: &DeTable<'_>,
    path: &[String],
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let (first, rest) = path.split_first()?;
    let (key, value) = doc
        .iter()
        .find(|(k, _)| k.get_ref().as_ref() == first.as_str())?;
    if rest.is_empty() {
        return Some((key.span(), value.span()));
    }
    inner_spans(value.get_ref(), rest)
}

fn inner_spans(
    value: &DeValue<'_>,
    path: &[String],
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    match value {
        DeValue::Table(t) => spans_of(t, path),
        DeValue::Array(items) => {
            let (index, rest) = path.split_first()?;
            let item = items.get(index.parse::<usize>().ok()?)?;
            if rest.is_empty() {
                return Some((item.span(), item.span()));
            }
            inner_spans(item.get_ref(), rest)
        }
        _ => None,
    }
}
