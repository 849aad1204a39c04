//! Compiling VCL text in a test: the program, or the errors it must have.

use shellac::vcl::ir::Program;
use shellac::vcl::{VclError, compile_text};

/// The program `src` compiles to; panics with the errors when it does not compile.
pub fn ok(src: &str) -> Program {
    compile_text("t.vcl", src).unwrap_or_else(|e| {
        panic!(
            "expected to compile:\n{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

/// The errors `src` has; panics when it compiles.
pub fn errors(src: &str) -> Vec<VclError> {
    match compile_text("t.vcl", src) {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e,
    }
}
