//! The layering test (issue 28, in the spirit of rust-analyzer's `tidy` tests): every
//! `crate::` / `super::` / `self::` path in `src/` (and every path that starts with one of the
//! file's child modules) points down the layers that ARCHITECTURE.md's "Layers" section lists,
//! and no two modules import each other — neither two top-level modules, nor two files of one
//! module, nor a module's own file (`mod.rs`, the node `self`) and one of its files. Paths are
//! followed through imports to where a name is defined (`crate::txlog::Record` is
//! `txlog::record`), and a `pub use` of a name the module's file uses nowhere else is its
//! interface, not a use. What still breaks the rule is listed below with the reason; an entry
//! that no longer matches anything fails too, so the lists only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Imports that still point up a layer: (importing file, imported top-level module, why).
const UPWARD: &[(&str, &str, &str)] = &[];

/// Circles between the files of one module still to be cut: (module, the files (children)
/// of the circle, `self` for the module's own file, why). A circle must lie inside one entry;
/// it may be smaller. Most were found when the checker learned to see a module's own file
/// (mod.rs): its files use types or helpers mod.rs defines while mod.rs calls into them; to
/// cut, the shared types go into their own file (as txlog's did: record.rs, recorder.rs,
/// Sink).
const CIRCLES: &[(&str, &[&str], &str)] = &[];

#[test]
fn imports_point_down_the_layers() {
    let layers = read_layers(&read("ARCHITECTURE.md"));
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    let files: Vec<(String, String)> = files
        .into_iter()
        .map(|p| {
            let text = read(&p);
            (p, text)
        })
        .collect();
    let problems = check(&files, &layers, UPWARD, CIRCLES);
    assert!(
        problems.is_empty(),
        "imports that break the layers (ARCHITECTURE.md, \"Layers\"):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_fails_on_an_upward_import() {
    let layers = read_layers("## Layers\n```text\nreload: a\ntls: b\nconfig: c\n```\n");
    let mut files = vec![
        (
            "src/reload.rs".to_string(),
            "use crate::tls::Certs;\n".to_string(),
        ),
        ("src/tls/mod.rs".to_string(), "pub mod watch;\n".to_string()),
        (
            "src/tls/watch.rs".to_string(),
            "use crate::config::Tls;\n".to_string(),
        ),
        (
            "src/config/mod.rs".to_string(),
            "pub struct Tls;\n".to_string(),
        ),
    ];
    assert_eq!(check(&files, &layers, &[], &[]), Vec::<String>::new());
    // The deliberate upward import, inside a group, on the file's third line.
    files[2].1 = "use crate::config::Tls;\n// crate::reload in a comment\nuse crate::{\n    config, reload::Live};\n".into();
    let problems = check(&files, &layers, &[], &[]);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("src/tls/watch.rs:4: ") && p.contains("up a layer")),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    // Listed with a reason it passes; the listed exception that matches nothing fails.
    assert_eq!(
        check(
            &files,
            &layers,
            &[("src/tls/watch.rs", "reload", "why")],
            &[]
        ),
        Vec::<String>::new()
    );
    files[2].1 = "use crate::config::Tls;\n".into();
    let stale = check(
        &files,
        &layers,
        &[("src/tls/watch.rs", "reload", "why")],
        &[],
    );
    assert!(stale.iter().any(|p| p.contains("no longer")), "{stale:?}");
}

#[test]
fn the_checker_fails_on_two_modules_of_one_layer_importing_each_other() {
    let layers = read_layers("## Layers\n```text\nrules, vcl: policy\nconfig: c\n```\n");
    let mut files = vec![
        (
            "src/rules.rs".to_string(),
            "use crate::vcl::Program;\n".to_string(),
        ),
        (
            "src/vcl/mod.rs".to_string(),
            "use crate::config::Config;\n".to_string(),
        ),
        (
            "src/config.rs".to_string(),
            "pub struct Config;\n".to_string(),
        ),
    ];
    assert_eq!(check(&files, &layers, &[], &[]), Vec::<String>::new());
    files[1].1.push_str("fn f(r: &crate::rules::Rules) {}\n");
    let problems = check(&files, &layers, &[], &[]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("an import circle in crate: rules, vcl"),
        "{problems:?}"
    );
    assert!(problems[0].contains("src/vcl/mod.rs:2"), "{problems:?}");
}

#[test]
fn the_checker_finds_circles_inside_a_module() {
    let layers = read_layers("## Layers\n```text\nproxy: a\n```\n");
    let files = vec![
        ("src/proxy/mod.rs".to_string(), "mod fsm;\nmod fetch;\nmod deliver;\npub struct Proxy;\n".to_string()),
        ("src/proxy/fsm.rs".to_string(), "use super::{Proxy, fetch::fetch};\n".to_string()),
        (
            "src/proxy/fetch.rs".to_string(),
            "fn f() { let s = \"super::fsm\"; let c = '\"'; }\n#[cfg(test)]\nmod tests {\n    use super::super::deliver::x;\n}\n".to_string(),
        ),
        ("src/proxy/deliver.rs".to_string(), "fn g() -> crate::proxy::fsm::Step { todo() }\n".to_string()),
    ];
    let problems = check(&files, &layers, &[], &[]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("proxy: deliver, fetch, fsm"),
        "{problems:?}"
    );
    assert!(problems[0].contains("src/proxy/fetch.rs:4"), "{problems:?}");
    let allowed: &[(&str, &[&str], &str)] =
        &[("proxy", &["deliver", "fetch", "fsm", "send"], "why")];
    assert_eq!(check(&files, &layers, &[], allowed), Vec::<String>::new());
}

#[test]
fn the_checker_finds_a_circle_between_a_module_file_and_its_own_files() {
    let layers = read_layers("## Layers\n```text\ntxlog: a\n```\n");
    // mod.rs re-exports its files' items and defines `Decision`; record.rs uses it: no circle.
    let mut files = vec![
        (
            "src/txlog/mod.rs".to_string(),
            "mod record;\nmod recorder;\npub use record::Record;\npub use recorder::{Recorder, Sink};\npub struct Decision;\n".to_string(),
        ),
        (
            "src/txlog/record.rs".to_string(),
            "use super::Decision;\nuse super::Sink;\npub struct Record(Decision);\n".to_string(),
        ),
        (
            "src/txlog/recorder.rs".to_string(),
            "pub trait Sink {}\npub struct Recorder;\n#[cfg(test)]\nmod tests {\n    use super::super::Decision;\n}\n".to_string(),
        ),
    ];
    assert_eq!(check(&files, &layers, &[], &[]), Vec::<String>::new());
    // The deliberate circle: mod.rs's own code uses a file's item (a bare path to its child,
    // as Rust 2018 allows) while that file uses mod.rs's `Decision` (through `crate::txlog`).
    files[0]
        .1
        .push_str("pub fn decide() -> Decision { recorder::start() }\n");
    files[2]
        .1
        .push_str("pub fn start() -> crate::txlog::Decision { todo!() }\n");
    let problems = check(&files, &layers, &[], &[]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("an import circle in txlog: recorder, self:"),
        "{problems:?}"
    );
    assert!(
        problems[0].contains("self → recorder (src/txlog/mod.rs:6)"),
        "{problems:?}"
    );
    assert!(
        problems[0].contains("recorder → self (src/txlog/recorder.rs:5)"),
        "{problems:?}"
    );
    // Listed, it passes.
    let allowed: &[(&str, &[&str], &str)] = &[("txlog", &["record", "recorder", "self"], "why")];
    assert_eq!(check(&files, &layers, &[], allowed), Vec::<String>::new());
    // A method call `x.recorder::<T>()` is no path to the child.
    files[0].1 = files[0]
        .1
        .replace("recorder::start()", "x.recorder::<u8>()");
    assert_eq!(check(&files, &layers, &[], &[]), Vec::<String>::new());
}

fn read(path: impl AsRef<Path>) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.rs` file under `dir` (as `src/...`), sorted.
fn collect(dir: &Path, out: &mut Vec<String>) {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut entries: Vec<_> = std::fs::read_dir(&full)
        .unwrap_or_else(|e| panic!("{}: {e}", full.display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    entries.sort();
    for name in entries {
        let rel = dir.join(&name);
        if full.join(&name).is_dir() {
            collect(&rel, out);
        } else if name.ends_with(".rs") {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}

/// The layers, top first: each line of the first ```text block after "## Layers" is
/// `module, module, ...: what they are`.
fn read_layers(doc: &str) -> Vec<Vec<String>> {
    let section = doc
        .split("\n## Layers")
        .nth(1)
        .or_else(|| doc.strip_prefix("## Layers"))
        .expect("a \"## Layers\" section");
    let block = section
        .split("```text\n")
        .nth(1)
        .expect("a ```text block in the Layers section");
    let block = block.split("```").next().unwrap_or_default();
    block
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(names, _)| names.split(',').map(|n| n.trim().to_string()).collect())
        .collect()
}

/// A reference from one file to a module path.
struct Ref {
    line: usize,
    from: Vec<String>,
    to: Vec<String>,
    text: String,
}

/// The problems, one line each (`file:line: ...`), sorted.
fn check(
    files: &[(String, String)],
    layers: &[Vec<String>],
    upward: &[(&str, &str, &str)],
    circles: &[(&str, &[&str], &str)],
) -> Vec<String> {
    let mut problems = Vec::new();
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.iter().map(move |m| (m.as_str(), i)))
        .collect();
    // The module tree the files make.
    let mut modules = BTreeSet::new();
    for path in files.iter().map(|(p, _)| p) {
        if let Some(module) = module_of(path) {
            for n in 1..=module.len() {
                modules.insert(module[..n].to_vec());
            }
        }
    }
    let mut refs: Vec<(&str, Ref)> = Vec::new();
    let mut scopes: BTreeMap<Vec<String>, Scope> = BTreeMap::new();
    for (path, text) in files {
        let Some(module) = module_of(path) else {
            continue;
        };
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(&module))
            .map(|m| m[module.len()].clone())
            .collect();
        for r in references(&module, &children, text) {
            refs.push((path, r));
        }
        scopes.insert(module.clone(), scope(&module, &children, text));
    }
    let tops: BTreeSet<&str> = modules
        .iter()
        .filter(|m| m.len() == 1)
        .map(|m| m[0].as_str())
        .collect();
    for t in &tops {
        if !layer_of.contains_key(t) {
            problems.push(format!(
                "src/{t}: the top-level module `{t}` is in no layer of the Layers section"
            ));
        }
    }
    for m in layer_of.keys() {
        if !tops.contains(m) && *m != "main" {
            problems.push(format!(
                "ARCHITECTURE.md: the Layers section names `{m}`, which src/ does not have"
            ));
        }
    }
    // Edges between siblings: (parent module, from child, to child) → the first file:line.
    let mut edges: BTreeMap<(Vec<String>, String, String), String> = BTreeMap::new();
    let mut used_upward = BTreeSet::new();
    for (path, r) in &refs {
        let Some(to) = resolve(&r.to, &modules, &scopes) else {
            continue; // an item another crate defines, imported into a module
        };
        let k = r.from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if k == r.from.len() && k == to.len() {
            continue; // a module's own items
        }
        // A module's own file (its mod.rs) is one node beside its children: `self`.
        let a = r.from.get(k).map_or(SELF, String::as_str).to_string();
        let b = to.get(k).map_or(SELF, String::as_str).to_string();
        let at = format!("{path}:{}", r.line);
        if k == 0 {
            if a == SELF || b == SELF {
                continue; // lib.rs / main.rs: only module declarations
            }
            let (Some(&la), Some(&lb)) = (layer_of.get(a.as_str()), layer_of.get(b.as_str()))
            else {
                continue;
            };
            if lb < la {
                if let Some(i) = upward.iter().position(|(f, m, _)| f == path && *m == b) {
                    used_upward.insert(i);
                    continue; // listed: not an edge of the graph either
                }
                problems.push(format!(
                    "{at}: `{}` points up a layer: `{a}` (layer {}) imports `{b}` (layer {})",
                    r.text,
                    la + 1,
                    lb + 1
                ));
                continue; // reported; the circles left are those inside one layer
            }
        }
        edges.entry((to[..k].to_vec(), a, b)).or_insert(at);
    }
    for (i, (f, m, _)) in upward.iter().enumerate() {
        if !used_upward.contains(&i) {
            problems.push(format!(
                "{f}: no longer imports `{m}`: remove it from UPWARD in tests/layers.rs"
            ));
        }
    }
    // Circles: strongly connected sets of siblings.
    let mut by_parent: BTreeMap<&Vec<String>, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for (p, a, b) in edges.keys() {
        by_parent
            .entry(p)
            .or_default()
            .entry(a)
            .or_default()
            .insert(b);
    }
    let mut used_circles = BTreeSet::new();
    for (parent, graph) in &by_parent {
        let name = if parent.is_empty() {
            "crate".to_string()
        } else {
            parent.join("::")
        };
        for scc in circles_of(graph) {
            if let Some(i) = circles
                .iter()
                .position(|(m, allowed, _)| *m == name && scc.iter().all(|s| allowed.contains(s)))
            {
                used_circles.insert(i);
                continue;
            }
            let witnesses: Vec<String> = edges
                .iter()
                .filter(|((p, a, b), _)| {
                    p == *parent && scc.contains(&a.as_str()) && scc.contains(&b.as_str())
                })
                .map(|((_, a, b), at)| format!("{a} → {b} ({at})"))
                .collect();
            problems.push(format!(
                "{}: an import circle in {name}: {}: {}",
                witnesses
                    .first()
                    .and_then(|w| w.rsplit_once('('))
                    .map_or("src", |(_, at)| at.trim_end_matches(')')),
                scc.join(", "),
                witnesses.join(", ")
            ));
        }
    }
    for (i, (m, c, _)) in circles.iter().enumerate() {
        if !used_circles.contains(&i) {
            problems.push(format!(
                "{m}: the circle {} is gone: remove it from CIRCLES in tests/layers.rs",
                c.join(", ")
            ));
        }
    }
    problems.sort();
    problems
}

/// The node of a module's own file (its `mod.rs`, or `name.rs` beside `name/`) in the graph of
/// its children: a child that uses the module's items and a module file that uses the child's
/// make a circle as two children do.
const SELF: &str = "self";

/// What a module's file puts in scope at its top level, to follow `super::Name` to where
/// `Name` is: the items it defines, the names it imports (name → full path; `None`: from
/// another crate) and the modules it glob-imports.
#[derive(Default)]
struct Scope {
    defs: BTreeSet<String>,
    uses: BTreeMap<String, Option<Vec<String>>>,
    globs: Vec<Vec<String>>,
}

/// The module a path names, following imports: `crate::txlog::Record`, with `pub use
/// record::Record;` in txlog/mod.rs, is `txlog::record`. None: it names another crate's item.
fn resolve(
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
    scopes: &BTreeMap<Vec<String>, Scope>,
) -> Option<Vec<String>> {
    let mut to = path.to_vec();
    'follow: for _ in 0..16 {
        let mut m = to.clone();
        while !m.is_empty() && !modules.contains(&m) {
            m.pop();
        }
        let Some((name, scope)) = to.get(m.len()).zip(scopes.get(&m)) else {
            return Some(m);
        };
        if scope.defs.contains(name) {
            return Some(m);
        }
        if let Some(full) = scope.uses.get(name) {
            let full = full.as_ref()?;
            if full.starts_with(&to[..=m.len()]) {
                return Some(m); // `use self::x;` of a name defined here
            }
            to = full.iter().chain(&to[m.len() + 1..]).cloned().collect();
            continue;
        }
        for g in &scope.globs {
            if scopes
                .get(g)
                .is_some_and(|s| s.defs.contains(name) || s.uses.contains_key(name))
            {
                to = g.iter().chain(&to[m.len()..]).cloned().collect();
                continue 'follow;
            }
        }
        return Some(m);
    }
    let mut m = to;
    while !m.is_empty() && !modules.contains(&m) {
        m.pop();
    }
    Some(m)
}

/// The [`Scope`] of the file of `module` (whose child modules are `children`).
fn scope(module: &[String], children: &BTreeSet<String>, src: &str) -> Scope {
    let toks = lex(src);
    let mut out = Scope::default();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Open(_) => depth += 1,
            Tok::Close(_) => depth = depth.saturating_sub(1),
            Tok::Ident(w) if depth == 0 && w == "use" => {
                let mut paths = Vec::new();
                i = use_tree(&toks, i + 1, Vec::new(), &mut paths);
                for (p, alias) in paths {
                    let Some(first) = p.first() else { continue };
                    let full = if matches!(first.as_str(), "crate" | "self" | "super")
                        || children.contains(first)
                    {
                        let mut to = if first == "crate" {
                            Vec::new()
                        } else {
                            module.to_vec()
                        };
                        let mut segs = p.iter().peekable();
                        if first == "crate" || first == "self" {
                            segs.next();
                        }
                        while segs.next_if(|s| *s == "super").is_some() {
                            to.pop();
                        }
                        to.extend(segs.cloned());
                        Some(to)
                    } else {
                        None
                    };
                    match (p.last().map(String::as_str), alias) {
                        (Some("*"), _) => {
                            if let Some(mut g) = full {
                                g.pop();
                                out.globs.push(g);
                            }
                        }
                        (_, Some(a)) if a == "_" => {}
                        (Some("self"), alias) => {
                            let full = full.map(|mut f| {
                                f.pop();
                                f
                            });
                            let name = alias.or_else(|| p.iter().rev().nth(1).cloned());
                            if let Some(name) = name {
                                out.uses.insert(name, full);
                            }
                        }
                        (Some(last), alias) => {
                            out.uses
                                .insert(alias.unwrap_or_else(|| last.to_string()), full);
                        }
                        (None, _) => {}
                    }
                }
                continue;
            }
            Tok::Ident(w)
                if depth == 0
                    && matches!(
                        w.as_str(),
                        "fn" | "struct"
                            | "enum"
                            | "trait"
                            | "type"
                            | "const"
                            | "static"
                            | "union"
                            | "mod"
                            | "macro_rules"
                    ) =>
            {
                let mut j = i + 1;
                while let Some((Tok::Ident(n), _)) = toks.get(j) {
                    if matches!(n.as_str(), "fn" | "unsafe" | "async" | "extern" | "mut") {
                        j += 1;
                        continue;
                    }
                    out.defs.insert(n.clone());
                    break;
                }
                if w == "macro_rules"
                    && let Some((Tok::Ident(n), _)) = toks.get(i + 2)
                {
                    out.defs.insert(n.clone());
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Reads a `use` tree from `toks[i]`; pushes each full path with its `as` name (a glob ends
/// in `*`). Returns the index after the tree.
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    if toks.get(i).map(|t| &t.0) == Some(&Tok::Path) {
        i += 1; // `use ::name` (another crate)
        prefix.push("::".into());
    }
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(w)) if w != "as" => {
                prefix.push(w.clone());
                i += 1;
            }
            Some(Tok::Open('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Close('}')) | None => return i + 1,
                        Some(Tok::Comma) => i += 1,
                        _ => i = use_tree(toks, i, prefix.clone(), out),
                    }
                }
            }
            Some(Tok::Star) => {
                prefix.push("*".into());
                out.push((prefix, None));
                return i + 1;
            }
            _ => return i,
        }
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Path) => i += 1,
            Some(Tok::Ident(w)) if w == "as" => {
                let alias = match toks.get(i + 1) {
                    Some((Tok::Ident(a), _)) => Some(a.clone()),
                    _ => None,
                };
                out.push((prefix, alias));
                return i + 2;
            }
            _ => {
                out.push((prefix, None));
                return i;
            }
        }
    }
}

/// The module a file is: `src/proxy/fsm.rs` → `proxy::fsm`, `src/proxy/mod.rs` → `proxy`;
/// `None` for the crate roots.
fn module_of(path: &str) -> Option<Vec<String>> {
    let rel = path.strip_prefix("src/")?.strip_suffix(".rs")?;
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.is_empty() || parts == ["lib"] || parts == ["main"] {
        return None;
    }
    Some(parts)
}

#[derive(Debug, PartialEq)]
enum Tok {
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
fn lex(src: &str) -> Vec<(Tok, usize)> {
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

/// The module paths a file names (`crate::`, `$crate::`, `self::`, `super::`, and a path
/// that starts with one of the module's `children`; groups expanded), each resolved to a
/// path from the crate root, from the (file or inline) module that names it.
fn references(module: &[String], children: &BTreeSet<String>, src: &str) -> Vec<Ref> {
    let toks = lex(src);
    let mut out = Vec::new();
    // Inline modules (`mod tests { ... }`): (name, brace depth inside).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    // Inside a `pub use` of the file's top level: a name it re-exports that the file names
    // nowhere else is the module's interface, not something the module's own code uses
    // (the paths of other files through it are followed to where the name is: [`resolve`]).
    let mut pub_use = false;
    // How often the file names each name, not counting module names (`mod x;`, `x::` inside
    // a `use`).
    let mut named: BTreeMap<&str, usize> = BTreeMap::new();
    let mut in_use = false;
    for (j, (t, _)) in toks.iter().enumerate() {
        match t {
            Tok::Semi => in_use = false,
            Tok::Ident(w) if w == "use" => in_use = true,
            Tok::Ident(w) => {
                let module = (j > 0 && toks[j - 1].0 == Tok::Ident("mod".into()))
                    || (in_use && toks.get(j + 1).is_some_and(|n| n.0 == Tok::Path));
                if !module {
                    *named.entry(w.as_str()).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Semi => pub_use = false,
            Tok::Ident(w) if w == "use" && depth == 0 && inline.is_empty() => {
                let before = |n: usize| i.checked_sub(n).map(|j| &toks[j].0);
                pub_use = before(1) == Some(&Tok::Ident("pub".into()))
                    || (before(1) == Some(&Tok::Close(')'))
                        && (3..=5).any(|n| {
                            before(n) == Some(&Tok::Ident("pub".into()))
                                && before(n - 1) == Some(&Tok::Open('('))
                        }));
            }
            Tok::Open('{') => depth += 1,
            Tok::Close('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Open('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth + 1));
                }
            }
            Tok::Ident(w)
                if matches!(w.as_str(), "crate" | "self" | "super")
                    || (inline.is_empty() && children.contains(w)) =>
            {
                let starts = i == 0 || !matches!(toks[i - 1].0, Tok::Path | Tok::Dot);
                let visibility = i > 0 && toks[i - 1].0 == Tok::Ident("in".into());
                if starts && !visibility && toks.get(i + 1).is_some_and(|t| t.0 == Tok::Path) {
                    let here: Vec<String> = module
                        .iter()
                        .cloned()
                        .chain(inline.iter().map(|(n, _)| n.clone()))
                        .collect();
                    let mut paths = Vec::new();
                    let end = tree(&toks, i, Vec::new(), &mut paths);
                    for (p, line) in paths {
                        let last = p.iter().rev().find(|s| *s != "self");
                        if pub_use && last.is_some_and(|n| named.get(n.as_str()) == Some(&1)) {
                            continue;
                        }
                        let mut to = if p[0] == "crate" {
                            Vec::new()
                        } else {
                            here.clone()
                        };
                        let mut segs = p.iter().peekable();
                        if p[0] == "crate" || p[0] == "self" {
                            segs.next();
                        }
                        while segs.next_if(|s| *s == "super").is_some() {
                            to.pop();
                        }
                        to.extend(segs.filter(|s| *s != "self").cloned());
                        out.push(Ref {
                            line,
                            from: here.clone(),
                            text: p.join("::"),
                            to,
                        });
                    }
                    i = end;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Reads a path (tree) from `toks[i]`: `a::b::{c, d::{e, f}}`; pushes each full path.
fn tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let mut line = toks.get(i).map_or(0, |t| t.1);
    loop {
        match toks.get(i) {
            Some((Tok::Ident(w), l)) => {
                prefix.push(w.clone());
                line = *l;
                i += 1;
            }
            Some((Tok::Open('{'), _)) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Close('}')) | None => return i + 1,
                        Some(Tok::Comma) => i += 1,
                        _ => {
                            let next = tree(toks, i, prefix.clone(), out);
                            // skip `as name` and anything else up to the item's end
                            i = next;
                            while let Some(t) = toks.get(i).map(|t| &t.0) {
                                if matches!(t, Tok::Comma | Tok::Close('}')) {
                                    break;
                                }
                                i += 1;
                            }
                        }
                    }
                }
            }
            Some((Tok::Star, _)) => {
                out.push((prefix, line));
                return i + 1;
            }
            _ => {
                if !prefix.is_empty() {
                    out.push((prefix, line));
                }
                return i;
            }
        }
        if toks.get(i).map(|t| &t.0) == Some(&Tok::Path) {
            i += 1;
        } else {
            if !prefix.is_empty() {
                out.push((prefix, line));
            }
            return i;
        }
    }
}

/// The circles of a graph: its strongly connected sets of more than one node (Tarjan).
fn circles_of<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct State<'a, 'g> {
        graph: &'g BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(s: &mut State<'a, '_>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        for &w in s.graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                scc.push(w);
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for &v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

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
