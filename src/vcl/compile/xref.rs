//! Cross references (as vcc_xref.c): which built-in subroutines reach each custom one, calls
//! of undefined subroutines, recursion, and declarations nothing uses.

use std::collections::{HashMap, HashSet};

use super::super::ast::{self, Pos};
use super::super::builtin::{SPLIT_SUBS, is_method_name, split_sub};
use super::super::types::{Method, Methods};
use super::Checker;

impl Checker<'_> {
    /// Pass 4: which built-in subroutines reach each custom one; calls of undefined
    /// subroutines and recursion are errors.
    pub(super) fn reach(&mut self) {
        let mut calls: HashMap<String, Vec<(String, Pos)>> = HashMap::new();
        for (name, sym) in &self.subs {
            let mut out = Vec::new();
            for body in &sym.bodies {
                collect_calls(body, &mut out);
            }
            calls.insert(name.clone(), out);
        }
        for (name, list) in &calls {
            if let Some(s) = self.subs.get_mut(name) {
                s.calls = list.iter().map(|(c, _)| c.clone()).collect();
            }
        }
        // Undefined targets.
        let mut missing = Vec::new();
        for list in calls.values() {
            for (callee, pos) in list {
                if !self.subs.contains_key(callee) {
                    missing.push((callee.clone(), *pos));
                } else if is_method_name(callee, self.dialect) {
                    missing.push((format!("!{callee}"), *pos));
                }
            }
        }
        for (callee, pos) in missing {
            if let Some(builtin) = callee.strip_prefix('!') {
                self.unsupported(
                    pos,
                    format!(
                        "call {builtin}: Shellac does not call a built-in subroutine from VCL; \
                         move the shared code into a sub of its own"
                    ),
                );
            } else {
                self.error(pos, format!("Undefined sub {callee}"));
            }
        }
        // Recursion: any cycle in the call graph.
        let names: Vec<String> = self.subs.keys().cloned().collect();
        let mut reported = HashSet::new();
        for start in &names {
            let mut stack = vec![(start.clone(), 0usize)];
            let mut path: Vec<String> = vec![start.clone()];
            let mut seen: HashSet<String> = HashSet::new();
            while let Some((node, i)) = stack.pop() {
                let list = calls.get(&node).cloned().unwrap_or_default();
                if i < list.len() {
                    stack.push((node.clone(), i + 1));
                    let (callee, pos) = &list[i];
                    if callee == start {
                        if reported.insert(start.clone()) {
                            let mut cycle = path.clone();
                            cycle.push(start.clone());
                            self.error(
                                *pos,
                                format!(
                                    "Recursive call: {} (subroutines may not call themselves)",
                                    cycle.join(" -> ")
                                ),
                            );
                        }
                    } else if calls.contains_key(callee) && seen.insert(callee.clone()) {
                        stack.push((callee.clone(), 0));
                        path.push(callee.clone());
                    }
                } else {
                    path.pop();
                }
            }
        }
        // Reachability from each built-in subroutine, and from the built-in VCL's split
        // subroutines (which its vcl_recv / vcl_backend_response call).
        let mut roots: Vec<(String, Methods)> = Method::ALL
            .into_iter()
            .filter(|m| m.exists_in(self.dialect))
            .map(|m| (m.sub_name().to_string(), m.bit()))
            .collect();
        for (name, bit) in SPLIT_SUBS {
            if split_sub(name, self.dialect).is_some() {
                if let Some(s) = self.subs.get_mut(*name) {
                    s.reached |= bit;
                }
                roots.push((name.to_string(), *bit));
            }
        }
        for (root, bit) in roots {
            let mut todo = vec![root];
            let mut seen = HashSet::new();
            while let Some(n) = todo.pop() {
                for (callee, _) in calls.get(&n).cloned().unwrap_or_default() {
                    if seen.insert(callee.clone()) {
                        if let Some(s) = self.subs.get_mut(&callee) {
                            s.used = true;
                            if !is_method_name(&callee, self.dialect) {
                                s.reached |= bit;
                            }
                        }
                        todo.push(callee);
                    }
                }
            }
        }
    }

    /// Pass 7: declarations nothing uses are errors, as in Varnish (`unused NAME;` allows it).
    pub(super) fn unused(&mut self) {
        // What a used subroutine calls is used (a sub named only as a VMOD's argument).
        loop {
            let callees: Vec<String> = self
                .subs
                .values()
                .filter(|s| s.used)
                .flat_map(|s| s.calls.iter().cloned())
                .collect();
            let mut changed = false;
            for c in callees {
                if let Some(s) = self.subs.get_mut(&c)
                    && !s.used
                {
                    s.used = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut found: Vec<(Pos, String)> = Vec::new();
        for t in &self.targets {
            if !t.used && !self.may_be_unused.contains(&t.name) {
                found.push((t.pos, format!("Unused backend {}, defined here", t.name)));
            }
        }
        for (name, p) in &self.probes {
            if !p.used && !self.may_be_unused.contains(name) {
                found.push((p.pos, format!("Unused probe {name}, defined here")));
            }
        }
        for (name, a) in &self.acls {
            if !a.used && !self.may_be_unused.contains(name) {
                found.push((a.pos, format!("Unused acl {name}, defined here")));
            }
        }
        for (name, s) in &self.subs {
            if !s.used && !self.may_be_unused.contains(name) {
                found.push((s.pos, format!("Unused sub {name}, defined here")));
            }
        }
        found.sort_by_key(|(p, _)| (p.file, p.line, p.col));
        for (pos, msg) in found {
            self.error(pos, msg);
        }
    }
}

/// Every `call NAME;` in a body, with where it is.
fn collect_calls(body: &[ast::Stmt], out: &mut Vec<(String, Pos)>) {
    for s in body {
        match s {
            ast::Stmt::Call {
                target: ast::Expr::Name(n, p),
                ..
            } => out.push((n.clone(), *p)),
            ast::Stmt::If {
                branches,
                otherwise,
                ..
            } => {
                for (_, b) in branches {
                    collect_calls(b, out);
                }
                if let Some(o) = otherwise {
                    collect_calls(o, out);
                }
            }
            ast::Stmt::Block { body, .. } => collect_calls(body, out),
            _ => {}
        }
    }
}
