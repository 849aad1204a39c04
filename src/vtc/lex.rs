//! Splitting VTC text into commands and their words, as varnishtest's `parse_string` does.
//!
//! One command per line (a backslash before the newline continues it). A word is a run of
//! non-blanks, a `"quoted string"` (backslash escapes processed, no newline inside) or a
//! `{block}` that runs to its matching brace — every brace inside counts, quoted or not, as
//! in vtc.c — and is kept verbatim: a block is a VCL program or a nested specification,
//! split again when it runs. `#` at the start of a command comments out the rest of its line.

use std::fmt;

/// One word of a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// Came from a `{...}` block (its text is verbatim).
    pub block: bool,
    /// Line (1-based, in the outermost text) where the word starts.
    pub line: u32,
}

/// One command: its words, the first being the command's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub line: u32,
    pub words: Vec<Word>,
}

impl Command {
    pub fn name(&self) -> &str {
        self.words.first().map_or("", |w| w.text.as_str())
    }
}

/// Text that cannot be split: an unterminated string or block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub line: u32,
    pub message: String,
}

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Splits `src` into commands. `first_line` is the line number of `src`'s first line (a
/// block's text starts on the line of its opening brace).
pub fn split(src: &str, first_line: u32) -> Result<Vec<Command>, LexError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut line = first_line;
    let mut i = 0;
    while i < b.len() {
        // Start of a command: blanks and comments.
        let c = b[i];
        if c.is_ascii_whitespace() {
            if c == b'\n' {
                line += 1;
            }
            i += 1;
            continue;
        }
        if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let mut cmd = Command {
            line,
            words: Vec::new(),
        };
        while i < b.len() && b[i] != b'\n' {
            let c = b[i];
            if c == b'\\' && b.get(i + 1) == Some(&b'\n') {
                i += 2;
                line += 1;
                continue;
            }
            if c == b'\\' && b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') {
                i += 3;
                line += 1;
                continue;
            }
            if c.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            let start_line = line;
            if c == b'"' {
                let (text, end) = quoted(b, i + 1).map_err(|message| LexError {
                    line: start_line,
                    message,
                })?;
                cmd.words.push(Word {
                    text,
                    block: false,
                    line: start_line,
                });
                i = end;
            } else if c == b'{' {
                let mut depth = 0usize;
                let start = i + 1;
                let mut j = i;
                loop {
                    match b.get(j) {
                        None => {
                            return Err(LexError {
                                line: start_line,
                                message: "block `{` without its closing `}`".into(),
                            });
                        }
                        Some(b'{') => depth += 1,
                        Some(b'}') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        Some(b'\n') => line += 1,
                        Some(_) => {}
                    }
                    j += 1;
                }
                cmd.words.push(Word {
                    text: String::from_utf8_lossy(&b[start..j]).into_owned(),
                    block: true,
                    line: start_line,
                });
                i = j + 1;
            } else {
                let start = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                cmd.words.push(Word {
                    text: String::from_utf8_lossy(&b[start..i]).into_owned(),
                    block: false,
                    line: start_line,
                });
            }
        }
        if !cmd.words.is_empty() {
            out.push(cmd);
        }
    }
    Ok(out)
}

/// A quoted string from `start` (just past the opening quote): its text with backslash
/// escapes processed and the index just past the closing quote.
fn quoted(b: &[u8], start: usize) -> Result<(String, usize), String> {
    let mut out = Vec::new();
    let mut i = start;
    loop {
        match b.get(i) {
            None | Some(b'\n') => return Err("quoted string without its closing `\"`".into()),
            Some(b'"') => return Ok((String::from_utf8_lossy(&out).into_owned(), i + 1)),
            Some(b'\\') => {
                let (byte, used) = backslash(&b[i..]);
                out.push(byte);
                i += used;
            }
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

/// One backslash escape at the start of `s` (`s[0]` is the backslash): the byte it stands for
/// and how many bytes it used, as Varnish's `VAV_BackSlash` (`\n \r \t \" \\`, octal `\NNN`,
/// hex `\xHH`; anything else stands for itself).
pub fn backslash(s: &[u8]) -> (u8, usize) {
    match s.get(1) {
        Some(b'n') => (b'\n', 2),
        Some(b'r') => (b'\r', 2),
        Some(b't') => (b'\t', 2),
        Some(b'"') => (b'"', 2),
        Some(b'\\') => (b'\\', 2),
        Some(b'0'..=b'7') => {
            let mut v: u32 = 0;
            let mut n = 1;
            while n <= 3 && matches!(s.get(n), Some(b'0'..=b'7')) {
                v = v * 8 + u32::from(s[n] - b'0');
                n += 1;
            }
            ((v & 0xff) as u8, n)
        }
        Some(b'x') => {
            let hex = |c: Option<&u8>| c.and_then(|c| (*c as char).to_digit(16));
            match (hex(s.get(2)), hex(s.get(3))) {
                (Some(h), Some(l)) => ((h * 16 + l) as u8, 4),
                _ => (b'x', 2),
            }
        }
        Some(&c) => (c, 2),
        None => (b'\\', 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(src: &str) -> Vec<Vec<String>> {
        split(src, 1)
            .unwrap()
            .into_iter()
            .map(|c| c.words.into_iter().map(|w| w.text).collect())
            .collect()
    }

    #[test]
    fn commands_words_strings_and_blocks() {
        let src = "varnishtest \"a \\\"b\\\"\"\n# comment\nserver s1 {\n\trxreq\n} -start\nclient c1 \\\n  -run\n";
        assert_eq!(
            words(src),
            vec![
                vec!["varnishtest".to_string(), "a \"b\"".into()],
                vec![
                    "server".into(),
                    "s1".into(),
                    "\n\trxreq\n".into(),
                    "-start".into()
                ],
                vec!["client".into(), "c1".into(), "-run".into()],
            ]
        );
    }

    #[test]
    fn braces_count_inside_strings_as_vtc_does() {
        // The `{` inside the quoted header counts: the block ends at the last brace.
        let cmds = split("server s1 {\n txresp -hdr \"X: {\"\n}\n}\n", 1).unwrap();
        assert_eq!(cmds.len(), 1);
        assert_eq!(cmds[0].words[2].text, "\n txresp -hdr \"X: {\"\n}\n");
    }

    #[test]
    fn line_numbers_and_continuations() {
        let cmds = split("a\n\nb \\\n c\n{\n}\nd", 1).unwrap();
        let lines: Vec<u32> = cmds.iter().map(|c| c.line).collect();
        assert_eq!(lines, vec![1, 3, 5, 7]);
        assert_eq!(cmds[1].words.len(), 2);
        assert!(cmds[2].words[0].block);
    }

    #[test]
    fn escapes() {
        assert_eq!(words("x \"a\\tb\\n\\x41\\101\\q\"")[0][1], "a\tb\nAAq");
    }

    #[test]
    fn unterminated() {
        assert!(split("x \"abc\ny", 1).is_err());
        assert!(split("x {abc", 1).is_err());
    }
}
