//! Rust source as the checker reads it: tokens enough to find paths (identifiers, `::`,
//! brackets, punctuation), comments, strings and character literals skipped ([`lex`]).

#[derive(Debug, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Path, // `::`
    Open(char),
    Close(char),
    Comma,
    Star,
    Dot,
    Semi,
    Other,
}

/// Rust tokens enough to find paths: comments, strings and character literals skipped.
pub(super) fn lex(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                line += usize::from(at(i) == '\n');
                i += 1;
            }
            i += 1;
            out.push((Tok::Other, line));
        } else if ch == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1; // a lifetime; its name lexes as an identifier
            }
            out.push((Tok::Other, line));
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr")
                && (at(i) == '"' || (at(i) == '#' && matches!(at(i + 1), '"' | '#')));
            if raw {
                let mut hashes = 0;
                while at(i) == '#' {
                    hashes += 1;
                    i += 1;
                }
                i += 1;
                while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#')) {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
                i += 1 + hashes;
                out.push((Tok::Other, line));
            } else if matches!(word.as_str(), "b" | "c") && matches!(at(i), '"' | '\'') {
                // b"..." / b'.': the quote lexes next as a string or character
            } else {
                if word == "r" && at(i) == '#' {
                    i += 1; // r#ident
                    continue;
                }
                out.push((Tok::Ident(word), line));
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Other, line));
        } else {
            i += 1;
            out.push((
                match ch {
                    ':' if at(i) == ':' => {
                        i += 1;
                        Tok::Path
                    }
                    '{' | '(' | '[' => Tok::Open(ch),
                    '}' | ')' | ']' => Tok::Close(ch),
                    ',' => Tok::Comma,
                    '.' => Tok::Dot,
                    ';' => Tok::Semi,
                    '*' => Tok::Star,
                    _ => Tok::Other,
                },
                line,
            ));
        }
    }
    out
}
