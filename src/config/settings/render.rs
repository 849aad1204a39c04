//! The reference, rendered from the setting definitions: docs/configuration.md's per-section
//! tables (between `<!-- settings [NAME] -->` and `<!-- /settings -->` markers, the prose
//! around them is the file's own) and examples/full.toml (the whole file).

use super::setting::{Default, Kind, Setting};
use super::{SECTIONS, Section, of};

/// What writes the generated parts, for the notes inside them.
pub const REGENERATE: &str = "SHELLAC_BLESS=1 cargo test --lib config::settings";

/// The value column of the reference: the kind in a word or two, and its range.
pub fn value_column(kind: &Kind) -> String {
    let word = match kind {
        Kind::Bool => "`true` / `false`".to_string(),
        Kind::Count { .. } => "whole number".into(),
        Kind::Port => "port".into(),
        Kind::Status { .. } => "status".into(),
        Kind::Statuses => "list of statuses".into(),
        Kind::Duration { .. } => "duration".into(),
        Kind::Size { .. } => "size".into(),
        Kind::Addresses => "list of addresses".into(),
        Kind::AdminAddress => "address or `\"off\"`".into(),
        Kind::Listeners | Kind::ClientListeners => "`true` / `false` / list of addresses".into(),
        Kind::Networks => "list of networks".into(),
        Kind::Text(_) => "string".into(),
        Kind::Texts(_) => "list of strings".into(),
        Kind::Choice(words) => words
            .iter()
            .map(|w| format!("`\"{w}\"`"))
            .collect::<Vec<_>>()
            .join(" / "),
        Kind::FieldTable(_) => "table".into(),
        Kind::Table { .. } => "table".into(),
        Kind::Probe => "name or table".into(),
        Kind::Rules => "`[[site.rule]]` tables".into(),
    };
    match kind.range() {
        Some(range) => format!("{word}, {range}"),
        None => word,
    }
}

fn default_column(s: &Setting) -> String {
    match s.default {
        Default::Value(v) => format!("`{v}`"),
        Default::Required => "required".into(),
        Default::Unset(what) => what.into(),
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The Markdown table of one section.
pub fn table(section: &str) -> String {
    let mut out = String::from("| key | value | default | meaning |\n|---|---|---|---|\n");
    for s in of(section) {
        let mut doc = s.doc.to_string();
        if s.restart && !section.starts_with("storage") {
            doc.push_str(" A reload cannot change it (restart).");
        }
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            s.key,
            cell(&value_column(&s.kind)),
            cell(&default_column(s)),
            cell(&doc)
        ));
    }
    out
}

/// Settings a reload cannot change, as a Markdown list of keys.
pub fn restart_list() -> String {
    let keys: Vec<String> = super::all()
        .filter(|s| s.restart && !s.section.starts_with("storage"))
        .map(|s| format!("`{}.{}`", s.section, s.key))
        .collect();
    format!("{}, and everything in `[storage]`.\n", keys.join(", "))
}

/// `text` with every marked block replaced by what the definitions render now; `Err` names a
/// marker without its end.
pub fn configuration_md(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!-- settings ") {
        let head_end = rest[start..]
            .find("-->")
            .map(|i| start + i + 3)
            .ok_or("unterminated `<!-- settings` marker")?;
        let name = rest[start + "<!-- settings ".len()..head_end - 3]
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let end = rest[head_end..]
            .find("<!-- /settings -->")
            .map(|i| head_end + i)
            .ok_or_else(|| format!("`<!-- settings [{name}] -->` has no `<!-- /settings -->`"))?;
        out.push_str(&rest[..head_end]);
        out.push('\n');
        if name == "restart" {
            out.push_str(&restart_list());
        } else if SECTIONS.iter().any(|s| s.name == name) {
            out.push_str(&table(&name));
        } else {
            return Err(format!("`<!-- settings [{name}] -->`: no such section"));
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The first sentence of a doc paragraph, as plain text (no Markdown code marks or links).
pub fn first_sentence(doc: &str) -> String {
    let plain = plain(doc);
    let bytes = plain.as_bytes();
    let mut depth = 0i32;
    for (i, c) in plain.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '.' if depth == 0 => {
                let next = bytes.get(i + 1).copied();
                let after = bytes.get(i + 2).copied();
                let abbreviation = ["e.g", "i.e", "etc"]
                    .iter()
                    .any(|a| plain[..i].ends_with(a));
                if next == Some(b' ')
                    && after.is_some_and(|b| b.is_ascii_uppercase() || b == b'"' || b == b'0')
                    && !abbreviation
                {
                    return plain[..=i].to_string();
                }
            }
            _ => {}
        }
    }
    plain
}

/// Markdown to plain text: code marks dropped, `[text](link)` as `text`.
fn plain(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    while let Some(open) = rest.find('[') {
        let close = rest[open..].find("](").map(|i| open + i);
        let end = close.and_then(|c| rest[c..].find(')').map(|i| c + i));
        match (close, end) {
            (Some(close), Some(end)) => {
                out.push_str(&rest[..open]);
                out.push_str(&rest[open + 1..close]);
                rest = &rest[end + 1..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out.replace('`', "")
}

/// `text` as `# ` comment lines of at most 95 columns.
fn comment(text: &str, out: &mut String) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 95 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// Whether examples/full.toml sets the key (else it shows it commented out): keys with a
/// default (at the default), required keys (at their example), and the names of repeated
/// tables (a named table reads better and others refer to it).
fn set_in_example(section: &Section, s: &Setting) -> bool {
    !section.optional
        && (matches!(s.default, Default::Value(_) | Default::Required)
            || (section.array && s.key == "name"))
}

/// examples/full.toml: every setting, at its default (or an example where it has none).
pub fn full_toml() -> String {
    let mut out = format!(
        "# Every setting Shellac reads, at its default value, with what it does (the first sentence\n\
         # of its entry in docs/configuration.md). Settings without a default are shown with an\n\
         # example value, commented out when Shellac runs without them.\n\
         # Generated from the setting definitions in src/config/settings/; do not edit: change\n\
         # them and run `{REGENERATE}`.\n\
         # Check it: shellac check examples/full.toml\n"
    );
    for section in SECTIONS.iter().filter(|s| !s.inline && s.name != "storage") {
        out.push('\n');
        let header = if section.array {
            format!("[[{}]]", section.name)
        } else {
            format!("[{}]", section.name)
        };
        if section.optional {
            out.push_str("# Off unless given: remove the leading `# ` to use it.\n");
            out.push_str(&format!("# {header}\n"));
        } else {
            out.push_str(&format!("{header}\n"));
        }
        for s in of(section.name) {
            setting(section, s, &mut out);
        }
    }
    out
}

fn setting(section: &Section, s: &Setting, out: &mut String) {
    comment(&about(section, s), out);
    if let Kind::Table { section: inner } = s.kind
        && SECTIONS.iter().any(|x| x.name == inner && x.array)
    {
        // A list of tables: one inline table of its keys, each explained above it.
        let mut keys = Vec::new();
        for k in of(inner) {
            comment(&about(section, k), out);
            keys.push(format!("{} = {}", k.key, k.sample()));
        }
        out.push_str(&format!("# {} = [{{ {} }}]\n", s.key, keys.join(", ")));
        return;
    }
    if let Kind::Table { section: inner } = s.kind {
        // An inline table's keys, as dotted keys (valid TOML where the table is).
        for k in of(inner) {
            comment(&about(section, k), out);
            out.push_str(&format!("# {}.{} = {}\n", s.key, k.key, k.sample()));
        }
        return;
    }
    let prefix = if set_in_example(section, s) { "" } else { "# " };
    out.push_str(&format!("{prefix}{} = {}\n", s.key, s.sample()));
}

/// The comment above a setting: its first sentence, its range, whether a reload can change it.
fn about(section: &Section, s: &Setting) -> String {
    let mut text = first_sentence(s.doc);
    if let Some(range) = s.kind.range() {
        match text.strip_suffix('.') {
            Some(t) => text = format!("{t} ({range})."),
            None => text.push_str(&format!(" ({range})")),
        }
    }
    if s.restart && !section.name.starts_with("storage") {
        text.push_str(" A reload cannot change it.");
    }
    text
}
