//! Shellac: a caching HTTP reverse proxy.
//!
//! See ARCHITECTURE.md for the bird's-eye view and the request path.

pub mod config;
