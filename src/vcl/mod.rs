//! The VCL front-end for Varnish configurations; not yet connected to anything (issue 21).
//!
//! It reads VCL of every dialect (2.0/2.1 without a `vcl` line, 3.0, 4.0/4.1). Nothing runs it
//! yet: checking names and types against Varnish's variable table and compiling to the policy
//! program are issue 21's next steps.

pub mod ast;
pub mod error;
pub mod lexer;

pub use error::VclError;
