//! Reading a VCL file with its `include`s: each included file is parsed where it stands (at
//! the top level its declarations, inside a `sub` its statements), relative paths are taken
//! relative to the including file, and cycles and runaway nesting are refused.

use std::path::{Path, PathBuf};

use super::ast::{Decl, Pos, Stmt, Vcl};
use super::error::VclError;
use super::parser::{parse_body, parse_file};

/// How deep includes may nest (a file including a file including ...).
pub const MAX_INCLUDE_DEPTH: usize = 16;
/// How many files one program may be read from.
const MAX_FILES: usize = 1024;

/// A VCL program as read: the main file's syntax tree with every include spliced in, and the
/// files it came from (`Pos::file` indexes `files`).
#[derive(Debug, Clone)]
pub struct Source {
    pub files: Vec<String>,
    /// Each file's text (as `files`), for the excerpts of errors.
    pub texts: Vec<String>,
    pub vcl: Vcl,
}

impl Source {
    /// Fills in each error's excerpt (the source line and a caret) from the file it is in.
    pub fn locate(&self, errors: &mut [VclError]) {
        for e in errors {
            if let Some(text) = self.texts.get(e.pos.file as usize) {
                e.locate_in(text);
            }
        }
    }
}

/// Reads `path` and every file it includes.
pub fn load(path: &Path) -> Result<Source, Vec<VclError>> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![VclError::new(
            &name,
            Pos::default(),
            format!("cannot read the VCL file: {e}"),
        )]
    })?;
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    load_text(&name, &text, Some(&canonical))
}

/// Reads VCL `text` named `name`; `path` is where it lives, for relative includes (`None`:
/// text that is not a file, whose includes must be absolute paths).
pub fn load_text(name: &str, text: &str, path: Option<&Path>) -> Result<Source, Vec<VclError>> {
    let mut loader = Loader {
        files: vec![name.to_string()],
        texts: vec![text.to_string()],
        errors: Vec::new(),
    };
    let vcl = match parse_file(name, 0, text) {
        Ok(vcl) => vcl,
        Err(mut e) => {
            e.locate_in(text);
            return Err(vec![e]);
        }
    };
    let stack = path.map(|p| vec![p.to_path_buf()]).unwrap_or_default();
    let vcl = loader.splice_decls(vcl, &stack, path.is_some());
    let source = Source {
        files: loader.files,
        texts: loader.texts,
        vcl,
    };
    if loader.errors.is_empty() {
        Ok(source)
    } else {
        let mut errors = loader.errors;
        source.locate(&mut errors);
        Err(errors)
    }
}

struct Loader {
    files: Vec<String>,
    texts: Vec<String>,
    errors: Vec<VclError>,
}

/// What an include names: one file, or a glob's matches.
enum Found {
    Files(Vec<PathBuf>),
    Skip,
}

impl Loader {
    fn error(&mut self, pos: Pos, message: String) {
        let file = self.file_name(pos);
        self.errors.push(VclError::new(&file, pos, message));
    }

    fn file_name(&self, pos: Pos) -> String {
        self.files
            .get(pos.file as usize)
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces every include in `vcl` (top level and inside subs) with what it names.
    /// `stack`: the files being read, innermost last; `from_file`: the top of `stack` is the
    /// file `vcl` was read from (otherwise relative includes cannot be resolved).
    fn splice_decls(&mut self, vcl: Vcl, stack: &[PathBuf], from_file: bool) -> Vcl {
        let mut decls = Vec::with_capacity(vcl.decls.len());
        for decl in vcl.decls {
            match decl {
                Decl::Include { path, glob, pos } => {
                    let site = (path.as_str(), glob, pos);
                    let main = &vcl.version;
                    self.each_included(site, stack, from_file, parse_file, |me, inner, stack| {
                        if let (Some((v, vpos)), Some((main, _))) = (&inner.version, main)
                            && v.as_str() > main.as_str()
                        {
                            me.error(
                                *vpos,
                                format!(
                                    "this file says 'vcl {v};' but the file that includes it \
                                     says 'vcl {main};'"
                                ),
                            );
                        }
                        decls.extend(me.splice_decls(inner, stack, true).decls);
                    });
                }
                Decl::Sub { name, body, pos } => {
                    let body = self.splice_stmts(body, stack, from_file);
                    decls.push(Decl::Sub { name, body, pos });
                }
                other => decls.push(other),
            }
        }
        Vcl {
            version: vcl.version,
            decls,
        }
    }

    /// Reads each file an include (`path`, `glob`, at `pos`) names, parses it with `parse` and
    /// hands it to `then` with the stack of files being read inside it, one file after the
    /// other; a file that cannot be read or parsed is an error and left out.
    fn each_included<T>(
        &mut self,
        (path, glob, pos): (&str, bool, Pos),
        stack: &[PathBuf],
        from_file: bool,
        parse: fn(&str, u16, &str) -> Result<T, VclError>,
        mut then: impl FnMut(&mut Self, T, &[PathBuf]),
    ) {
        for file in self.resolve(path, glob, pos, stack, from_file) {
            let Some((index, text)) = self.read(&file, pos) else {
                continue;
            };
            let name = self.files[index as usize].clone();
            match parse(&name, index, &text) {
                Ok(inner) => {
                    let mut inner_stack = stack.to_vec();
                    inner_stack.push(file);
                    then(self, inner, &inner_stack);
                }
                Err(e) => self.errors.push(e),
            }
        }
    }

    fn splice_stmts(&mut self, body: Vec<Stmt>, stack: &[PathBuf], from_file: bool) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(body.len());
        for stmt in body {
            match stmt {
                Stmt::Include { path, glob, pos } => {
                    let site = (path.as_str(), glob, pos);
                    self.each_included(site, stack, from_file, parse_body, |me, inner, stack| {
                        out.extend(me.splice_stmts(inner, stack, true));
                    });
                }
                Stmt::If {
                    branches,
                    otherwise,
                    pos,
                } => {
                    let branches = branches
                        .into_iter()
                        .map(|(c, b)| (c, self.splice_stmts(b, stack, from_file)))
                        .collect();
                    let otherwise = otherwise.map(|b| self.splice_stmts(b, stack, from_file));
                    out.push(Stmt::If {
                        branches,
                        otherwise,
                        pos,
                    });
                }
                Stmt::Block { body, pos } => out.push(Stmt::Block {
                    body: self.splice_stmts(body, stack, from_file),
                    pos,
                }),
                other => out.push(other),
            }
        }
        out
    }

    /// The files an include names, checked against the include stack.
    fn resolve(
        &mut self,
        path: &str,
        glob: bool,
        pos: Pos,
        stack: &[PathBuf],
        from_file: bool,
    ) -> Vec<PathBuf> {
        let found = self.find(path, glob, pos, stack, from_file);
        let Found::Files(files) = found else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for file in files {
            let canonical = file.canonicalize().unwrap_or_else(|_| file.clone());
            if let Some(i) = stack.iter().position(|s| *s == canonical) {
                let chain: Vec<String> = stack[i..]
                    .iter()
                    .chain([&canonical])
                    .map(|p| p.display().to_string())
                    .collect();
                self.error(
                    pos,
                    format!(
                        "include cycle: {} (a file may not include itself)",
                        chain.join(" includes ")
                    ),
                );
                continue;
            }
            if stack.len() >= MAX_INCLUDE_DEPTH {
                self.error(
                    pos,
                    format!(
                        "includes nest deeper than {MAX_INCLUDE_DEPTH} files here ({})",
                        canonical.display()
                    ),
                );
                continue;
            }
            out.push(canonical);
        }
        out
    }

    fn find(
        &mut self,
        path: &str,
        glob: bool,
        pos: Pos,
        stack: &[PathBuf],
        from_file: bool,
    ) -> Found {
        let given = Path::new(path);
        let full = if given.is_absolute() {
            given.to_path_buf()
        } else if let (true, Some(current)) = (from_file, stack.last()) {
            current
                .parent()
                .map(|dir| dir.join(given))
                .unwrap_or_else(|| given.to_path_buf())
        } else {
            self.error(
                pos,
                format!(
                    "include \"{path}\": a relative path needs the including file's own path \
                     (this VCL was not read from a file; give an absolute path)"
                ),
            );
            return Found::Skip;
        };
        if !glob {
            return Found::Files(vec![full]);
        }
        let (Some(dir), Some(pattern)) = (full.parent(), full.file_name()) else {
            self.error(
                pos,
                format!("include +glob \"{path}\": no file name to match"),
            );
            return Found::Skip;
        };
        let pattern = pattern.to_string_lossy().into_owned();
        if dir.to_string_lossy().contains(['*', '?']) {
            self.error(
                pos,
                format!(
                    "include +glob \"{path}\": only the file name may hold '*' or '?', not the \
                     directories"
                ),
            );
            return Found::Skip;
        }
        let mut matches: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .filter(|e| glob_matches(&pattern, &e.file_name().to_string_lossy()))
                .map(|e| e.path())
                .collect(),
            Err(e) => {
                self.error(pos, format!("include +glob \"{path}\": {e}"));
                return Found::Skip;
            }
        };
        if matches.is_empty() {
            self.error(
                pos,
                format!("include +glob \"{path}\": the glob pattern matched no files"),
            );
            return Found::Skip;
        }
        // Varnish includes a glob's matches in name order.
        matches.sort();
        Found::Files(matches)
    }

    /// Reads an included file, giving it an index.
    fn read(&mut self, file: &Path, pos: Pos) -> Option<(u16, String)> {
        if self.files.len() >= MAX_FILES {
            self.error(
                pos,
                format!("more than {MAX_FILES} files included; refusing to read more"),
            );
            return None;
        }
        match std::fs::read_to_string(file) {
            Ok(text) => {
                let index = self.files.len() as u16;
                self.files.push(file.display().to_string());
                self.texts.push(text.clone());
                Some((index, text))
            }
            Err(e) => {
                self.error(
                    pos,
                    format!("cannot read the included file {}: {e}", file.display()),
                );
                None
            }
        }
    }
}

/// Whether `name` matches the glob `pattern` (`*`: any run of characters, `?`: one).
fn glob_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matching with one backtrack point (the last `*`).
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests;
