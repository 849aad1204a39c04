//! Turning TOML byte offsets into what an operator needs: file, line, column and dotted key.

use std::fmt;

use serde::de::DeserializeOwned;
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

/// Deserializes `text`, collecting as many errors as possible: after each error the offending
/// `key = value` line is commented out and parsing resumes, so one run reports every bad key.
pub(super) fn deserialize<T: DeserializeOwned>(
    text: &str,
    file: &str,
) -> Result<T, Vec<ConfigError>> {
    let mut src = text.to_string();
    let mut errors = Vec::new();
    for _ in 0..64 {
        let e = match toml::from_str::<T>(&src) {
            Ok(v) if errors.is_empty() => return Ok(v),
            Ok(_) => break,
            Err(e) => e,
        };
        let offset = e.span().map(|s| s.start);
        let key = offset.map(|o| key_at(&src, o)).unwrap_or_default();
        let (line, column) = offset.map(|o| line_col(text, o)).unwrap_or((0, 0));
        errors.push(ConfigError {
            file: file.to_string(),
            line,
            column,
            key,
            message: e.message().trim().to_string(),
        });
        // Resume only if the error sits on a plain `key = value` line we can comment out and the
        // document still parses afterwards; otherwise the later errors would be noise.
        let Some(offset) = offset else { break };
        let start = src[..offset].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let end = src[offset..]
            .find('\n')
            .map(|i| offset + i)
            .unwrap_or(src.len());
        let line_text = src[start..end].trim_start();
        if line_text.starts_with('[') || line_text.starts_with('#') || !line_text.contains('=') {
            break;
        }
        // Comment out the line without changing its length (later offsets stay right), even
        // when it starts with a multi-byte character (found by fuzzing: a leading BOM).
        let width = src[start..].chars().next().map_or(1, char::len_utf8);
        src.replace_range(start..start + width, &format!("#{}", " ".repeat(width - 1)));
        if DeTable::parse(&src).is_err() {
            break;
        }
    }
    errors.sort_by_key(|e| (e.line, e.column));
    Err(errors)
}

/// Builds an error located at the dotted `path` (deepest existing part of it).
pub(super) fn at_path(text: &str, file: &str, path: &[String], message: String) -> ConfigError {
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

fn line_col(text: &str, offset: usize) -> (usize, usize) {
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

/// The dotted key whose key or value contains `offset` (empty if none).
fn key_at(text: &str, offset: usize) -> String {
    let Ok(doc) = DeTable::parse(text) else {
        return String::new();
    };
    let mut path = Vec::new();
    walk_table(doc.get_ref(), offset, &mut path);
    path.join(".")
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
                if walk_value(item.get_ref(), offset, path) {
                    return true;
                }
                path.pop();
            }
            false
        }
        _ => false,
    }
}
