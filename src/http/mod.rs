//! HTTP helpers shared by the request path: Cache-Control parsing and header hygiene.

pub mod cache_control;
pub mod headers;
pub mod strict;
pub mod target;
