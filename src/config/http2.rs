//! `[http2]`: HTTP/2 to clients — cleartext h2c, the protocol limits Shellac announces, and the
//! bounds of the flood defences (docs/http2.md, SECURITY.md).

use serde::{Deserialize, Serialize};

use super::units::Size;

/// `[http2]`. Every limit here is per client connection.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http2Config {
    /// Accept HTTP/2 with prior knowledge (h2c) on the cleartext listeners: a connection that
    /// starts with the HTTP/2 preface is served as HTTP/2. Default false.
    pub h2c: bool,
    /// SETTINGS_MAX_CONCURRENT_STREAMS: requests one connection may have open. Default 100.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a client may send on one stream
    /// before Shellac reads them. Default 256 KiB.
    pub stream_window: Size,
    /// The connection's receive window: request body bytes a client may send on all its
    /// streams together before Shellac reads them. Default 1 MiB.
    pub connection_window: Size,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload a client may send. Default 16 KiB.
    pub max_frame_size: Size,
    /// Response bytes buffered per stream ahead of the client's flow-control window.
    /// Default 64 KiB.
    pub stream_send_buffer: Size,
    /// Streams (requests) one connection may open in its lifetime; then GOAWAY (NO_ERROR)
    /// and the client opens a new connection. 0: no bound. Default 10000.
    pub max_requests: u64,
    /// Stream resets a connection may cause — RST_STREAM from the client (rapid reset) and
    /// resets Shellac sends for the client's protocol errors (MadeYouReset) — beyond one per
    /// completed response. Default 100.
    pub reset_budget: u32,
    /// Frames that carry neither a request nor its body — PING, SETTINGS, PRIORITY, frames
    /// of unknown types — a connection may send per second (and in one burst).
    /// Default 1000.
    pub control_frames_per_second: u32,
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            h2c: false,
            max_concurrent_streams: 100,
            stream_window: Size(256 * 1024),
            connection_window: Size(1024 * 1024),
            max_frame_size: Size(16 * 1024),
            stream_send_buffer: Size(64 * 1024),
            max_requests: 10_000,
            reset_budget: 100,
            control_frames_per_second: 1000,
        }
    }
}
