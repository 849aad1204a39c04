//! HTTP caching over HTTP/1.1, one test binary (each module was a binary of its own): basic
//! proxying, freshness and storability, conditional requests, revalidation, Vary, stale
//! serving, named storages, coalescing, invalidation, 1xx responses, HTTP/1.0 clients and
//! failure handling.
//! Test names are `MODULE::NAME` (`cargo test --test caching vary::`).

#[path = "../common/mod.rs"]
mod common;

mod basic;
mod coalescing;
mod conditional;
mod errors;
mod freshness;
mod http10;
mod interim;
mod invalidation;
mod revalidation;
mod stale;
mod storability;
mod storages;
mod vary;
