//! Shellac: a caching HTTP reverse proxy.
//!
//! See ARCHITECTURE.md for the bird's-eye view and the request path.

pub mod config;
pub mod cache;
pub mod http;
pub mod stats;
