//! Loading files with includes: relative paths, cycles, depth, globs.

use super::*;
use crate::vcl::ast::Decl;

/// A directory removed when the test ends.
struct Dir(PathBuf);

impl Dir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir() -> Dir {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "shellac-vcl-load-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).expect("temp dir");
    Dir(d)
}

#[test]
fn includes_are_relative_to_the_including_file() {
    let d = dir();
    std::fs::create_dir(d.path().join("conf")).unwrap();
    std::fs::write(
        d.path().join("main.vcl"),
        "vcl 4.1;\ninclude \"conf/backends.vcl\";\nsub vcl_recv {\n include \"conf/recv.vcl\";\n}\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("conf/backends.vcl"),
        "backend a { .host = \"127.0.0.1\"; }\ninclude \"more.vcl\";\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("conf/more.vcl"),
        "backend b { .host = \"127.0.0.1\"; }\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("conf/recv.vcl"),
        "set req.http.x = \"1\";\nreturn (pass);\n",
    )
    .unwrap();
    let src = load(&d.path().join("main.vcl")).unwrap_or_else(|e| panic!("{e:?}"));
    let names: Vec<&str> = src
        .vcl
        .decls
        .iter()
        .map(|d| match d {
            Decl::Backend { name, .. } | Decl::Sub { name, .. } => name.as_str(),
            _ => "?",
        })
        .collect();
    assert_eq!(names, ["a", "b", "vcl_recv"]);
    let Decl::Sub { body, .. } = &src.vcl.decls[2] else {
        panic!()
    };
    assert_eq!(body.len(), 2);
    // Positions name the file they are in.
    let Stmt::Set { pos, .. } = &body[0] else {
        panic!()
    };
    assert!(
        src.files[pos.file as usize].ends_with("recv.vcl"),
        "{:?}",
        src.files
    );
    assert_eq!(pos.line, 1);
}

#[test]
fn cycles_depth_and_missing_files_are_errors() {
    let d = dir();
    std::fs::write(d.path().join("a.vcl"), "include \"b.vcl\";\n").unwrap();
    std::fs::write(d.path().join("b.vcl"), "include \"a.vcl\";\n").unwrap();
    let errs = load(&d.path().join("a.vcl")).unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].message.contains("include cycle"), "{}", errs[0]);
    assert!(errs[0].file.ends_with("b.vcl"), "{}", errs[0]);

    std::fs::write(d.path().join("self.vcl"), "include \"self.vcl\";\n").unwrap();
    let errs = load(&d.path().join("self.vcl")).unwrap_err();
    assert!(errs[0].message.contains("include cycle"), "{}", errs[0]);

    // A chain deeper than the bound (no cycle).
    for i in 0..=MAX_INCLUDE_DEPTH + 1 {
        std::fs::write(
            d.path().join(format!("n{i}.vcl")),
            format!("include \"n{}.vcl\";\n", i + 1),
        )
        .unwrap();
    }
    std::fs::write(d.path().join(format!("n{}.vcl", MAX_INCLUDE_DEPTH + 2)), "").unwrap();
    let errs = load(&d.path().join("n0.vcl")).unwrap_err();
    assert!(errs[0].message.contains("nest deeper"), "{}", errs[0]);

    std::fs::write(
        d.path().join("m.vcl"),
        "include \"nope.vcl\";\ninclude \"gone.vcl\";\n",
    )
    .unwrap();
    let errs = load(&d.path().join("m.vcl")).unwrap_err();
    assert_eq!(errs.len(), 2, "both missing files reported: {errs:?}");
    assert_eq!((errs[1].pos.line, errs[1].pos.col), (2, 1));
}

#[test]
fn text_without_a_file_needs_absolute_includes() {
    let errs = load_text("<vcl>", "include \"x.vcl\";", None).unwrap_err();
    assert!(errs[0].message.contains("absolute path"), "{}", errs[0]);
}

#[test]
fn globs_match_file_names_in_order() {
    let d = dir();
    std::fs::write(d.path().join("b-2.vcl"), "backend b2 { .host = \"h\"; }\n").unwrap();
    std::fs::write(d.path().join("b-1.vcl"), "backend b1 { .host = \"h\"; }\n").unwrap();
    std::fs::write(d.path().join("other.txt"), "junk").unwrap();
    std::fs::write(d.path().join("main.vcl"), "include +glob \"b-*.vcl\";\n").unwrap();
    let src = load(&d.path().join("main.vcl")).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(src.vcl.decls.len(), 2);
    assert!(matches!(&src.vcl.decls[0], Decl::Backend { name, .. } if name == "b1"));
    std::fs::write(d.path().join("none.vcl"), "include +glob \"zz*.vcl\";\n").unwrap();
    let errs = load(&d.path().join("none.vcl")).unwrap_err();
    assert!(errs[0].message.contains("matched no files"), "{}", errs[0]);
    assert!(glob_matches("a*b?c", "axxbyc"));
    assert!(!glob_matches("a*b", "axxbc"));
}
