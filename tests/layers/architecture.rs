//! ARCHITECTURE.md stays true of the tree: every path it names exists, and its code map
//! names every top-level module.

use super::*;

#[test]
fn architecture_names_only_paths_that_exist() {
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exists = |p: &str| root.join(p).exists();
    let stale = stale_paths(&read("ARCHITECTURE.md"), &files, &exists);
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (moved or removed: fix the line):\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_path_check_names_a_stale_path() {
    let files = vec![
        "src/proxy/mod.rs".to_string(),
        "src/proxy/fetch/decide.rs".to_string(),
        "src/clock.rs".to_string(),
    ];
    let on_disk = [
        "src/proxy",
        "src/proxy/fetch",
        "src/proxy/mod.rs",
        "tests/common",
    ];
    let exists =
        |p: &str| on_disk.contains(&p.trim_end_matches('/')) || files.iter().any(|f| f == p);
    let doc = "`proxy/mod.rs`, `fetch/decide.rs`, `clock.rs`, src/proxy/, `tests/common`, \
               `proxy/policy/NAME.rs`, `backend/<kind>.rs`, `head -1 src/*.rs`, `/.well-known/a/`\n\
               the map: `proxy/fsm.rs` and src/cache/mod.rs;\n`decide.rs`, `fetch/judge.rs`, `gone.rs`\n";
    assert_eq!(
        stale_paths(doc, &files, &exists),
        vec![
            "ARCHITECTURE.md:2: `proxy/fsm.rs` (src/proxy/fsm.rs)".to_string(),
            "ARCHITECTURE.md:2: `src/cache/mod.rs` (src/cache/mod.rs)".to_string(),
            "ARCHITECTURE.md:3: `fetch/judge.rs` (no file under src/ ends so)".to_string(),
            "ARCHITECTURE.md:3: `gone.rs` (no file under src/ ends so)".to_string(),
        ]
    );
}

/// The paths `doc` names that do not exist, one line each (`ARCHITECTURE.md:line: ...`):
/// every `src/...` path; a `module/...` path (ending in `.rs` or `/`) whose first part is a
/// top-level module, under `src/`; any other `a/b.rs`, `a/` or `file.rs` in backticks, as the
/// end of some path under `src/` (the paragraphs name files within their module) unless it
/// exists from the repository's root (`tests/common`). Placeholders (`NAME`, `<kind>`, `*`)
/// are skipped.
fn stale_paths(doc: &str, files: &[String], exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let top: BTreeSet<&str> = files
        .iter()
        .filter_map(|f| f.strip_prefix("src/"))
        .filter_map(|f| f.split('/').next())
        .map(|f| f.strip_suffix(".rs").unwrap_or(f))
        .collect();
    // Every path under src/ and its directories, as `/a/b.rs` and `/a/`, to match ends.
    let mut under: BTreeSet<String> = BTreeSet::new();
    for f in files {
        let rel = f.strip_prefix("src").unwrap_or(f);
        under.insert(rel.to_string());
        let mut dir = rel;
        while let Some((d, _)) = dir.rsplit_once('/') {
            if d.is_empty() {
                break;
            }
            under.insert(format!("{d}/"));
            dir = d;
        }
    }
    let mut out = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        let mut named: Vec<String> = line
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|t| t.trim().to_string())
            .collect();
        // `src/...` outside backticks too.
        let mut rest = line;
        while let Some(i) = rest.find("src/") {
            let before = rest[..i].chars().last();
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || "_./-".contains(c)))
                .unwrap_or(tail.len());
            let path = tail[..end].trim_end_matches(['.', ',', '-']);
            let wild = tail[end..].starts_with(['*', '<', '{']);
            if !wild && !before.is_some_and(|c| c.is_alphanumeric() || "_/`".contains(c)) {
                named.push(path.to_string());
            }
            rest = &tail[end..];
        }
        for t in named {
            // A URL path (`/.well-known/acme-challenge/`) is no file.
            let placeholder = t.starts_with('/')
                || t.contains(['<', '>', '*', '{', '}', ' ', '(', ')'])
                || t.split(['/', '.']).any(|s| {
                    s.len() > 1
                        && s == s.to_uppercase()
                        && s.chars().all(|c| c.is_ascii_alphabetic())
                });
            if placeholder {
                continue;
            }
            let problem = if t.starts_with("src/") {
                (!exists(&t)).then(|| t.clone())
            } else if t.contains('/')
                && (t.ends_with(".rs") || t.ends_with('/'))
                && t.split('/').next().is_some_and(|m| top.contains(m))
            {
                let p = format!("src/{t}");
                (!exists(&p)).then_some(p)
            } else if (t.contains('/') && (t.ends_with(".rs") || t.ends_with('/')))
                || (t.ends_with(".rs")
                    && t.len() > 3
                    && t[..t.len() - 3]
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_'))
            {
                let end = format!("/{t}");
                (!exists(&t) && !under.iter().any(|u| u.ends_with(&end)))
                    .then(|| "no file under src/ ends so".to_string())
            } else {
                None
            };
            if let Some(p) = problem {
                out.push(format!("ARCHITECTURE.md:{}: `{t}` ({p})", n + 1));
            }
        }
    }
    out
}

/// The code map names every top-level module of `src/` (as `name/` or `name.rs`), so a
/// reader finds any module there.
#[test]
fn the_code_map_names_every_top_level_module() {
    let doc = read("ARCHITECTURE.md");
    let start = doc
        .find("\n## Code map\n")
        .expect("ARCHITECTURE.md has a \"Code map\"");
    let map = &doc[start + 1..];
    let map = &map[..map[1..].find("\n## ").map_or(map.len(), |e| e + 1)];
    let mut missing = Vec::new();
    for entry in std::fs::read_dir("src").expect("src/") {
        let name = entry.expect("an entry of src/").file_name();
        let name = name.to_string_lossy();
        let module = name.trim_end_matches(".rs");
        if module == "lib" {
            continue;
        }
        if !map.contains(&format!("`{module}/")) && !map.contains(&format!("`{module}.rs`")) {
            missing.push(name.to_string());
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map names no line for: {missing:?}"
    );
}
