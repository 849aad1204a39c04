//! What a file refers to: its `crate::` / `super::` / `self::` paths and those that start
//! with one of its child modules, followed through its imports to where a name is defined
//! ([`references`]).

use super::*;

/// The node of a module's own file (its `mod.rs`, or `name.rs` beside `name/`) in the graph of
/// its children: a child that uses the module's items and a module file that uses the child's
/// make a circle as two children do.
pub(super) const SELF: &str = "self";

/// What a module's file puts in scope at its top level, to follow `super::Name` to where
/// `Name` is: the items it defines, the names it imports (name → full path; `None`: from
/// another crate) and the modules it glob-imports.
#[derive(Default)]
pub(super) struct Scope {
    defs: BTreeSet<String>,
    uses: BTreeMap<String, Option<Vec<String>>>,
    globs: Vec<Vec<String>>,
}

/// The module a path names, following imports: `crate::txlog::Record`, with `pub use
/// record::Record;` in txlog/mod.rs, is `txlog::record`. None: it names another crate's item.
pub(super) fn resolve(
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
pub(super) fn scope(module: &[String], children: &BTreeSet<String>, src: &str) -> Scope {
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
pub(super) fn module_of(path: &str) -> Option<Vec<String>> {
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

/// The module paths a file names (`crate::`, `$crate::`, `self::`, `super::`, and a path
/// that starts with one of the module's `children`; groups expanded), each resolved to a
/// path from the crate root, from the (file or inline) module that names it.
pub(super) fn references(module: &[String], children: &BTreeSet<String>, src: &str) -> Vec<Ref> {
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
