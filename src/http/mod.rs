//! HTTP helpers shared by the request path: Cache-Control and date parsing, header hygiene.

pub mod cache_control;
pub mod date;
pub mod headers;
pub mod strict;
pub mod structured;
pub mod target;
