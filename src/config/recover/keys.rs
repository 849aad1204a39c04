//! A key serde did not expect (unknown here: misspelt, in the wrong table, or an alias) or
//! missed (required), explained in the operator's words with the draft's repair.

use std::ops::Range;

use toml::de::DeTable;

use super::draft::{Draft, Edit};
use super::words::*;
use crate::config::locate;
use crate::config::settings::{self, SECTIONS};

pub(super) fn unknown_key(
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

pub(super) fn missing_key(
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
