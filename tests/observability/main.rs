//! What the operator sees, one test binary (each module was a binary of its own): counters
//! (`stats`), the access log (`access_log`), live views (`live`), what is cached for a URL
//! (`inspect`) and the web dashboard (`dashboard`). Test names are `MODULE::NAME`
//! (`cargo test --test observability stats::`).

#[path = "../common/mod.rs"]
mod common;

mod access_log;
mod dashboard;
mod inspect;
mod live;
mod stats;
