//! The text being repaired so that checking can go on past an error: the edits made to it,
//! and where each of its lines was in the original.

use std::ops::Range;

use crate::config::locate;

/// A repair to the draft.
pub(super) enum Edit {
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
pub(super) struct Draft {
    pub(super) src: String,
    /// Original (1-based) line number of each line of `src`.
    pub(super) lines: Vec<usize>,
}

impl Draft {
    pub(super) fn new(text: &str) -> Draft {
        Draft {
            src: text.to_string(),
            lines: (1..=text.split('\n').count()).collect(),
        }
    }

    /// Line (in the original) and column of `offset`.
    pub(super) fn position(&self, offset: usize) -> (usize, usize) {
        let (line, column) = locate::line_col(&self.src, offset);
        (self.lines.get(line - 1).copied().unwrap_or(line), column)
    }

    /// The 0-based line holding `offset`, and that line's byte range.
    pub(super) fn line_of(&self, offset: usize) -> (usize, Range<usize>) {
        let offset = offset.min(self.src.len());
        let start = self.src[..offset].rfind('\n').map_or(0, |i| i + 1);
        let end = self.src[offset..]
            .find('\n')
            .map_or(self.src.len(), |i| offset + i);
        (self.src[..start].matches('\n').count(), start..end)
    }

    pub(super) fn line_starts(&self) -> Vec<usize> {
        std::iter::once(0)
            .chain(self.src.match_indices('\n').map(|(i, _)| i + 1))
            .collect()
    }

    pub(super) fn apply(&mut self, edit: Edit) {
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
