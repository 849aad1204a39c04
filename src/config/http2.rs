//! `[http2]`: HTTP/2 to clients — cleartext h2c, the protocol limits Shellac announces, and the
//! bounds of the flood defences (docs/http2.md, SECURITY.md).

use std::fmt;
use std::net::SocketAddr;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use super::units::Size;

/// `[http2]`. Every limit here is per client connection.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http2Config {
    /// Accept HTTP/2 with prior knowledge (h2c) on cleartext listeners: a connection that
    /// starts with the HTTP/2 preface is served as HTTP/2. `true`: on every `server.listen`
    /// address; a list: on those of them only. Default false.
    pub h2c: H2c,
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
            h2c: H2c::Off,
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

/// `h2c`: on which cleartext listeners a connection may start with the HTTP/2 preface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum H2c {
    /// `false`: on none.
    Off,
    /// `true`: on every `server.listen` address.
    All,
    /// A list: on the listeners configured with these addresses (each one of `server.listen`,
    /// checked in config/validate/listeners.rs).
    Only(Vec<SocketAddr>),
}

impl H2c {
    /// Whether the listener configured as `listen` (an entry of `server.listen`) accepts h2c.
    pub fn on(&self, listen: SocketAddr) -> bool {
        match self {
            H2c::Off => false,
            H2c::All => true,
            H2c::Only(list) => list.contains(&listen),
        }
    }
}

impl Serialize for H2c {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            H2c::Off => s.serialize_bool(false),
            H2c::All => s.serialize_bool(true),
            H2c::Only(list) => {
                let mut seq = s.serialize_seq(Some(list.len()))?;
                for a in list {
                    seq.serialize_element(&a.to_string())?;
                }
                seq.end()
            }
        }
    }
}

fn address<E: de::Error>(v: &str) -> Result<SocketAddr, E> {
    v.parse().map_err(|_| {
        E::custom(format!(
            "`{v}` is not an address (e.g. \"127.0.0.1:6081\" or \"[::1]:6081\"): h2c is true, false, or a list of server.listen addresses"
        ))
    })
}

impl<'de> Deserialize<'de> for H2c {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<H2c, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = H2c;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("true, false, or a list of server.listen addresses")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<H2c, E> {
                Ok(if on { H2c::All } else { H2c::Off })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<H2c, E> {
                address(v).map(|a| H2c::Only(vec![a]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<H2c, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    out.push(address(&item)?);
                }
                Ok(H2c::Only(out))
            }
        }
        d.deserialize_any(V)
    }
}
