//! Edge Side Includes (issue 29): the parser that turns a fetched body into a stored
//! [`Program`] and the program's stored form. It depends on nothing in the crate, so any layer
//! may use it; the fetch filter that runs it and the delivery filter that assembles a page
//! from its program plug into the body-filter seam (ARCHITECTURE.md, "Body filters";
//! `proxy/filter/esi/`).

pub mod parse;
pub mod program;
pub mod stored;

pub use parse::{Diag, Options, Parser, Severity};
pub use program::{DecodeError, Include, Op, Program, Target};
pub use stored::{FIELD, Level, Parent, Top, TopRequest, marked, stored_gzip, stored_program};
