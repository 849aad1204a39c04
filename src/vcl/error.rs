//! A VCL error: the file, line and column it is at and what is wrong, in the operator's words.

use super::ast::Pos;

/// Whether the file is wrong, or right but asks for something Shellac does not do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorKind {
    /// Varnish would refuse this too: a syntax, name or type error.
    #[default]
    Invalid,
    /// Valid VCL that Shellac cannot run (a VMOD, variable or feature it does not have):
    /// refused rather than ignored, with what to do instead.
    Unsupported,
}

/// What the lexer, parser or checker could not accept, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{}:{}: {message}", pos.line, pos.col)]
pub struct VclError {
    pub file: String,
    pub pos: Pos,
    pub message: String,
    pub kind: ErrorKind,
    /// The source line and a caret line under the token, as varnishd shows them ([`excerpt`]);
    /// `None` when the text is not at hand.
    pub excerpt: Option<String>,
}

impl VclError {
    /// An error of the file at `pos`.
    pub fn new(file: &str, pos: Pos, message: String) -> VclError {
        VclError {
            file: file.to_string(),
            pos,
            message,
            kind: ErrorKind::Invalid,
            excerpt: None,
        }
    }

    /// Something valid Shellac does not do.
    pub fn unsupported(file: &str, pos: Pos, message: String) -> VclError {
        VclError {
            kind: ErrorKind::Unsupported,
            ..VclError::new(file, pos, message)
        }
    }
}

impl VclError {
    /// The error with its source line and caret, on three lines (`file:line:col: message`,
    /// the line, the caret), as `shellac check` and a refused reload show it.
    pub fn with_excerpt(&self) -> String {
        match &self.excerpt {
            Some(x) => format!("{self}\n{x}"),
            None => self.to_string(),
        }
    }

    /// Fills in the excerpt from `text`, the file the error is in.
    pub fn locate_in(&mut self, text: &str) {
        if self.excerpt.is_none() {
            self.excerpt = excerpt(text, self.pos);
        }
    }
}

/// Line `pos.line` of `text`, and under it a `^` at `pos.col` (columns in characters) with a
/// `~` under the rest of the token there (a name, a number, a string, or one character).
/// Tabs before the column stay tabs so the caret lines up.
pub fn excerpt(text: &str, pos: Pos) -> Option<String> {
    let index = (pos.line as usize).checked_sub(1)?;
    let line = text.lines().nth(index)?.trim_end_matches('\r');
    let col = (pos.col as usize).max(1) - 1;
    let chars: Vec<char> = line.chars().collect();
    if col > chars.len() {
        return None;
    }
    let token = &chars[col.min(chars.len())..];
    let len = match token.first() {
        None => 1,
        Some('"') => token
            .iter()
            .skip(1)
            .position(|c| *c == '"')
            .map_or(token.len(), |end| end + 2),
        Some(c) if c.is_alphanumeric() || *c == '_' => token
            .iter()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
            .count(),
        Some(_) => 1,
    };
    let lead: String = chars[..col]
        .iter()
        .map(|c| if *c == '\t' { '\t' } else { ' ' })
        .collect();
    let mark = format!("^{}", "~".repeat(len.saturating_sub(1)));
    let shown: String = chars.iter().collect();
    Some(format!("{shown}\n{lead}{mark}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caret_under_the_token() {
        let text = "vcl 4.1;\n\tif (req.method == \"PURGE\") {\n";
        let pos = |line, col| Pos { line, col, file: 0 };
        assert_eq!(
            excerpt(text, pos(2, 6)).unwrap(),
            "\tif (req.method == \"PURGE\") {\n\t    ^~~~~~~~~~"
        );
        assert_eq!(
            excerpt(text, pos(2, 20)).unwrap(),
            "\tif (req.method == \"PURGE\") {\n\t                  ^~~~~~~"
        );
        assert_eq!(
            excerpt(text, pos(2, 17)).unwrap().lines().nth(1),
            Some("\t               ^")
        );
        assert_eq!(excerpt(text, pos(9, 1)), None);
    }
}
