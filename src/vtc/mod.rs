//! A varnishtest runner: Varnish's own test scripts (`.vtc`) run against Shellac
//! (`shellac vtc FILE...`, `tests/varnishtest.rs`; docs/varnishtest.md).
//!
//! The runner (`runner`) takes files a few at a time and gives each an outcome (`outcome`).
//! A file is split into commands (`lex`) and checked for what it needs (`scope`: a file
//! needing something out of scope is skipped, never counted as passed). Its top level runs on
//! a thread of its own (`exec`): servers (`server`) and clients (`client`) are threads that
//! run their specifications (`spec`) over HTTP/1 conversations (`http`, on `conn`);
//! `varnish vN` (`varnish`) is a real `shellac serve` process (`process`) whose VCL is
//! checked with `shellac check` (`check`) and whose Varnish parameters, CLI commands and
//! counters map to Shellac's settings, admin API and `/stats` (`params`, `cli`, `counters`).
//! Every thread shares the macros, log and stop flag (`context`); the first failure stops
//! them all, and a file has a time limit after which its processes are killed by their ids.

mod barrier;
mod census;
mod check;
mod cli;
mod client;
mod cmd;
mod conn;
pub mod context;
mod counters;
mod exec;
mod expect;
mod halt;
mod http;
pub mod lex;
mod logexp;
mod outcome;
mod params;
mod peer;
mod process;
mod proxy_hdr;
pub mod report;
mod runner;
mod scope;
mod server;
mod sock;
mod spec;
mod stream;
mod tx;
mod varnish;

pub use census::{Case, CaseVerdict};
pub use cmd::{CommandArgs, collect, command};
pub use outcome::{ErrvclCase, Options, Outcome, Verdict, Wiring, display_name};
pub use runner::Runner;
