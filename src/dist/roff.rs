//! Markdown (the subset docs/ is written in) to a manual page in `man(7)` roff: headings,
//! paragraphs, lists, fenced code, tables (one tagged paragraph per row), inline code, bold,
//! emphasis and links. HTML comments are dropped.

/// A manual page: `.TH` header, then `markdown` rendered. `name` and `section` make the title
/// line (`SHELLAC.TOML(5)`); `summary` is the NAME section's line after the dash.
pub fn page(name: &str, section: &str, summary: &str, version: &str, markdown: &str) -> String {
    let mut out = format!(
        ".TH {} {section} \"\" \"shellac {version}\" \"Shellac\"\n.SH NAME\n{} \\- {}\n",
        quote(&name.to_uppercase()),
        escape(name),
        escape(summary)
    );
    body(markdown, &mut out);
    out
}

/// `text` quoted as one macro argument.
fn quote(text: &str) -> String {
    format!("\"{}\"", escape(text).replace('"', "\\(dq"))
}

/// Text safe in roff: backslashes escaped, hyphens kept as typed, a control character at the
/// start of a line neutralised.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            '\u{2014}' => out.push_str("\\(em"),
            '\u{2013}' => out.push_str("\\(en"),
            '\u{2192}' => out.push_str("\\(->"),
            '\u{2190}' => out.push_str("\\(<-"),
            '\u{2264}' => out.push_str("\\(<="),
            '\u{2265}' => out.push_str("\\(>="),
            '\u{2248}' => out.push_str("\\(~~"),
            '\u{00d7}' => out.push_str("\\(mu"),
            '\u{2026}' => out.push_str("\\&..."),
            '\u{00a0}' => out.push_str("\\~"),
            _ => out.push(c),
        }
    }
    out
}

/// A line of running text: `.` and `'` at the start protected.
fn line(text: &str) -> String {
    if text.starts_with('.') || text.starts_with('\'') {
        format!("\\&{text}")
    } else {
        text.to_string()
    }
}

/// Inline Markdown to roff fonts: `code` and **bold** in bold, *emphasis* / _emphasis_ in
/// italics, `[text](url)` as its text.
pub fn inline(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '`' {
            let ticks = rest.len() - rest.trim_start_matches('`').len();
            let fence = &rest[..ticks];
            if let Some(end) = rest[ticks..].find(fence) {
                let code = rest[ticks..ticks + end].trim();
                out.push_str("\\fB");
                out.push_str(&escape(code));
                out.push_str("\\fR");
                rest = &rest[ticks + end + ticks..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix("**")
            && let Some(end) = after.find("**")
        {
            // Code inside bold stays bold: no font change of its own.
            let inner = inline(&after[..end])
                .replace("\\fB", "")
                .replace("\\fR", "");
            out.push_str("\\fB");
            out.push_str(&inner);
            out.push_str("\\fR");
            rest = &after[end + 2..];
            continue;
        }
        if c == '['
            && let Some(close) = rest.find("](")
            && let Some(end) = rest[close..].find(')')
            && !rest[1..close].contains('[')
        {
            out.push_str(&inline(&rest[1..close]));
            rest = &rest[close + end + 1..];
            continue;
        }
        if (c == '*' || c == '_')
            && rest.len() > 1
            && rest[1..].starts_with(|n: char| n.is_alphanumeric())
            && let Some(end) = rest[1..].find(c)
            && (out.is_empty() || out.ends_with([' ', '(', '"']))
        {
            let inner = &rest[1..1 + end];
            let after = &rest[1 + end + 1..];
            if !after.starts_with(|n: char| n.is_alphanumeric()) && !inner.ends_with(' ') {
                out.push_str("\\fI");
                out.push_str(&inline(inner));
                out.push_str("\\fR");
                rest = after;
                continue;
            }
        }
        out.push_str(&escape(&c.to_string()));
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The cells of a table row `| a | b |` (escaped pipes `\|` kept in their cell).
fn cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|');
    let row = row.strip_suffix('|').unwrap_or(row);
    let mut out: Vec<String> = Vec::new();
    let mut cell = String::new();
    let mut chars = row.chars().peekable();
    let mut in_code = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cell.push('|');
            }
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => out.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    out.push(cell);
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

fn is_rule_row(row: &str) -> bool {
    cells(row)
        .iter()
        .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
}

/// Renders the blocks of `markdown` after the page header: running text is gathered into a
/// paragraph; any other block ends it and is written by its own step.
fn body(markdown: &str, out: &mut String) {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut i = 0;
    let mut first_heading = true;
    let mut paragraph: Vec<String> = Vec::new();
    while i < lines.len() {
        let raw = lines[i];
        let trimmed = raw.trim();
        // HTML comments (the reference's generated-table markers).
        if trimmed.starts_with("<!--") {
            while i < lines.len() && !lines[i].contains("-->") {
                i += 1;
            }
            i += 1;
            continue;
        }
        let fence = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        let heading = trimmed.starts_with('#');
        let table = trimmed.starts_with('|') && i + 1 < lines.len() && is_rule_row(lines[i + 1]);
        let item = list_item(trimmed);
        if !trimmed.is_empty() && fence.is_none() && !heading && !table && item.is_none() {
            // Running text, a quote's too: joined into the paragraph.
            let text = trimmed.strip_prefix('>').map_or(trimmed, str::trim);
            paragraph.push(text.to_string());
            i += 1;
            continue;
        }
        flush(&mut paragraph, out);
        i = if let Some(fence) = fence {
            code_block(&lines, i, fence, out)
        } else if heading {
            section(trimmed, &mut first_heading, out);
            i + 1
        } else if table {
            table_rows(&lines, i, out)
        } else if let Some((mark, text)) = item {
            list_entry(&lines, i, &mark, text, out)
        } else {
            // A blank line: the paragraph's end.
            i + 1
        };
    }
    flush(&mut paragraph, out);
}

/// Writes the gathered paragraph, if any, and empties it.
fn flush(paragraph: &mut Vec<String>, out: &mut String) {
    if !paragraph.is_empty() {
        // Joined first: inline code and emphasis may span the source's line breaks.
        out.push_str(".PP\n");
        out.push_str(&line(&inline(&paragraph.join(" "))));
        out.push('\n');
        paragraph.clear();
    }
}

/// A fenced code block starting at `lines[i]`, not filled; returns the line after it.
fn code_block(lines: &[&str], mut i: usize, fence: &str, out: &mut String) -> usize {
    out.push_str(".PP\n.RS 4\n.nf\n");
    i += 1;
    while i < lines.len() && !lines[i].trim().starts_with(fence) {
        out.push_str(&line(&escape(lines[i])));
        out.push('\n');
        i += 1;
    }
    out.push_str(".fi\n.RE\n");
    i + 1
}

/// A heading: `#` and `##` become sections, deeper ones subsections; the first `#` is the
/// document's title, which the NAME line says already.
fn section(trimmed: &str, first_heading: &mut bool, out: &mut String) {
    let level = trimmed.len() - trimmed.trim_start_matches('#').len();
    let title = inline(trimmed.trim_start_matches('#').trim());
    if level == 1 && *first_heading {
        *first_heading = false;
    } else if level <= 2 {
        out.push_str(&format!(".SH {}\n", quote_tag(&title)));
    } else {
        out.push_str(&format!(".SS \"{}\"\n", title.replace('"', "\\(dq")));
    }
}

/// A table whose header row is `lines[i]`: one tagged paragraph per row, the first cell as
/// the tag and the others as `header: cell` lines. Returns the line after the table.
fn table_rows(lines: &[&str], mut i: usize, out: &mut String) -> usize {
    let header = cells(lines[i].trim());
    i += 2;
    while i < lines.len() && lines[i].trim().starts_with('|') {
        let row = cells(lines[i]);
        let tag = row.first().map(String::as_str).unwrap_or_default();
        out.push_str(".TP\n");
        out.push_str(&line(&if tag.is_empty() {
            "\\&".to_string()
        } else {
            inline(tag)
        }));
        out.push('\n');
        let mut first = true;
        for (h, c) in header.iter().zip(row.iter()).skip(1) {
            if c.is_empty() {
                continue;
            }
            if !first {
                out.push_str(".br\n");
            }
            first = false;
            let text = if h.is_empty() {
                inline(c)
            } else {
                format!("{}: {}", inline(h), inline(c))
            };
            out.push_str(&line(&text));
            out.push('\n');
        }
        i += 1;
    }
    i
}

/// A list item at `lines[i]` (its `mark` and first line's `text`) with its continuation
/// lines; an indented item is a nested one. Returns the line after it.
fn list_entry(lines: &[&str], mut i: usize, mark: &str, text: &str, out: &mut String) -> usize {
    let raw = lines[i];
    let indent = raw.len() - raw.trim_start().len();
    let mut item = vec![text.to_string()];
    i += 1;
    // Continuation lines: indented, not a new item, not blank.
    while i < lines.len() {
        let nt = lines[i].trim();
        if nt.is_empty()
            || list_item(nt).is_some()
            || nt.starts_with('|')
            || nt.starts_with("```")
            || nt.starts_with('#')
        {
            break;
        }
        item.push(nt.to_string());
        i += 1;
    }
    if indent > 0 {
        out.push_str(".RS 4\n");
    }
    out.push_str(&format!(".IP {mark} 4\n"));
    out.push_str(&line(&inline(&item.join(" "))));
    out.push('\n');
    if indent > 0 {
        out.push_str(".RE\n");
    }
    i
}

/// A heading as one macro argument (already escaped: only its quotes are left to protect).
fn quote_tag(title: &str) -> String {
    format!("\"{}\"", title.replace('"', "\\(dq"))
}

/// A list item's mark (`\(bu` or `3.`) and text.
fn list_item(line: &str) -> Option<(String, &str)> {
    if let Some(rest) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) {
        return Some(("\\(bu".to_string(), rest));
    }
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && digits < 4 {
        let rest = &line[digits..];
        if let Some(text) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some((format!("{}.", &line[..digits]), text));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_marks_become_fonts() {
        assert_eq!(inline("a `b-c` d"), "a \\fBb\\-c\\fR d");
        assert_eq!(inline("**x** and [y](http://z)"), "\\fBx\\fR and y");
        assert_eq!(inline("*em* snake_case_name"), "\\fIem\\fR snake_case_name");
        assert_eq!(inline("a\\b"), "a\\eb");
        assert_eq!(inline("req.http.*, resp.*"), "req.http.*, resp.*");
        assert_eq!(inline("**`x`.**"), "\\fBx.\\fR");
    }

    #[test]
    fn tables_become_tagged_paragraphs() {
        let md = "| key | value |\n|---|---|\n| `a` | one \\| two |\n";
        let out = page("x", "5", "y", "1", md);
        assert!(out.contains(".TP\n\\fBa\\fR\nvalue: one | two\n"), "{out}");
    }

    #[test]
    fn code_blocks_are_not_filled_and_dots_are_protected() {
        let out = page("x", "7", "y", "1", "```\n.a\nb\n```\n\n.c `d\ne` f\n");
        assert!(out.contains(".nf\n\\&.a\nb\n.fi\n"), "{out}");
        assert!(out.contains("\\&.c \\fBd e\\fR f\n"), "{out}");
    }

    #[test]
    fn headings_and_lists() {
        let out = page(
            "x",
            "7",
            "y",
            "1",
            "# T\n\n## `[a]` b\n\n- one\n  more\n- two\n",
        );
        assert!(out.contains(".SH \"\\fB[a]\\fR b\"\n"), "{out}");
        assert!(out.contains(".IP \\(bu 4\none more\n"), "{out}");
    }
}
