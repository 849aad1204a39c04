//! The VCL front-end for Varnish configurations; not yet connected to anything (issue 21).
//!
//! `parse` reads one VCL file of any dialect (2.0/2.1 without a `vcl` line, 3.0, 4.0/4.1) into
//! an `ast::Vcl`. Nothing runs it yet: checking names and types against Varnish's variable
//! table and compiling to the policy program are issue 21's next steps.

pub mod ast;
pub mod error;
mod expr;
pub mod lexer;
pub mod parser;
mod stmt;
#[cfg(test)]
mod tests;

pub use error::VclError;
pub use parser::parse;
