//! A VCL error: the file, line and column it is at and what is wrong, in the operator's words.

use super::ast::Pos;

/// What the lexer or parser could not read, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{}:{}: {message}", pos.line, pos.col)]
pub struct VclError {
    pub file: String,
    pub pos: Pos,
    pub message: String,
}
