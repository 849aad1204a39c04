//! The rule run over the references: each one judged against the layers and the listed
//! exceptions, the module graph built, and its circles found ([`check`]).

use super::*;

/// A reference from one file to a module path.
pub(super) struct Ref {
    pub(super) line: usize,
    pub(super) from: Vec<String>,
    pub(super) to: Vec<String>,
    pub(super) text: String,
}

/// The problems, one line each (`file:line: ...`), sorted.
pub(super) fn check(
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
                "{f}: no longer imports `{m}`: remove it from UPWARD in tests/layers/main.rs"
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
                "{m}: the circle {} is gone: remove it from CIRCLES in tests/layers/main.rs",
                c.join(", ")
            ));
        }
    }
    problems.sort();
    problems
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
