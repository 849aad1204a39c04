//! A VCL error: the file, line and column it is at and what is wrong, in the operator's words.

use super::ast::Pos;

/// Whether the file is wrong, or right but asks for something Shellac does not do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorKind {
    /// Varnish would refuse this too: a syntax, name or type error.
    #[default]
    Invalid,
    /// Valid VCL that Shellac cannot run (a VMOD, variable or feature it does not have):
    /// refused rather than ignored, with what to do instead.
    Unsupported,
}

/// What the lexer, parser or checker could not accept, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{}:{}: {message}", pos.line, pos.col)]
pub struct VclError {
    pub file: String,
    pub pos: Pos,
    pub message: String,
    pub kind: ErrorKind,
}

impl VclError {
    /// An error of the file at `pos`.
    pub fn new(file: &str, pos: Pos, message: String) -> VclError {
        VclError {
            file: file.to_string(),
            pos,
            message,
            kind: ErrorKind::Invalid,
        }
    }

    /// Something valid Shellac does not do.
    pub fn unsupported(file: &str, pos: Pos, message: String) -> VclError {
        VclError {
            kind: ErrorKind::Unsupported,
            ..VclError::new(file, pos, message)
        }
    }
}
