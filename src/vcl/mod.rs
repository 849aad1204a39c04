//! The VCL front-end for Varnish configurations (issue 21).
//!
//! `load` reads a VCL file with its includes into a syntax tree (`ast`, via `lexer` and
//! `parser`), `compile` checks it against the variable table (`vars`) and the function table
//! and produces the policy program (`ir`), or every error with file:line:column. The program
//! declares its origins (`origins`); the dialect's built-in VCL (`builtin`) follows the
//! operator's subroutines.

pub mod ast;
pub mod attach;
pub mod blob;
pub mod builtin;
mod compile;
pub mod error;
mod expr;
pub mod ir;
pub mod lexer;
pub mod load;
pub mod origins;
pub mod parser;
pub mod pcre;
pub mod run;
mod stmt;
#[cfg(test)]
mod tests;
pub mod types;
pub mod vars;

pub use compile::{Options, compile, compile_with, only_unsupported};
pub(crate) use compile::{duration_unit, replacement};
pub use error::{ErrorKind, VclError};
pub use parser::parse;

/// Reads and compiles the VCL file at `path` (with its includes).
pub fn compile_file(path: &std::path::Path) -> Result<ir::Program, Vec<VclError>> {
    compile(&load::load(path)?)
}

/// Compiles VCL `text` named `name` that is not read from a file (its includes must be
/// absolute paths).
pub fn compile_text(name: &str, text: &str) -> Result<ir::Program, Vec<VclError>> {
    compile(&load::load_text(name, text, None)?)
}
