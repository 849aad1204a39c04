//! Transaction records: what happened to each request, for the access log and `shellac log`.
//!
//! In the spirit of Varnish's VSL: when a response ends, the request path encodes its
//! [`Record`] into its worker thread's current chunk (a compact binary form, `wire.rs`) and
//! hands full chunks — or what it holds when the worker goes idle — to that worker's bounded,
//! lock-free queue (one shard per worker thread). A background writer thread drains the
//! shards, formats, writes the access log, keeps `shellac top`'s rankings and feeds live
//! subscribers. A full queue drops the chunk and counts its records in `log_dropped`; a request
//! never waits for the log.
//!
//! Architecture invariant: the request path takes no lock and does no I/O for logging.
//!
//! The files, bottom up (each imports only those above it): `decision.rs` and `time.rs`
//! (leaves), `format.rs` (the log format spec), `record.rs` (the record, its life cycle and
//! the [`Sink`] it is finished into), `strings.rs` (the strings it captures), `wire.rs` (its
//! encoded form), `values.rs` (the values of a line), `json.rs` (a JSON line), `render.rs` (a
//! format applied to an encoded record), `top.rs` (rankings), `shards.rs` (the queues
//! recorder and writer share), `writer.rs` (the writer thread and its control messages),
//! `recorder.rs` (the [`Recorder`], the one sink); apart from them, `vsl.rs` (Varnish-style
//! records kept in memory when `log.vsl_records` asks for them). This file only declares and
//! re-exports.

mod decision;
pub mod format;
mod json;
mod record;
mod recorder;
mod render;
mod shards;
mod strings;
mod time;
pub mod top;
mod values;
pub mod vsl;
mod wire;
mod writer;

pub use decision::{Decision, DecisionKind};
pub use format::Format;
pub use record::{Record, RecordHead, Sink, TextRange};
pub use recorder::{LIVE_CAPACITY, Recorder, Subscription, TOP_LEASE, worker_parks};
pub use top::{Dimension, Top};
pub use writer::{LogOutput, open_output};
