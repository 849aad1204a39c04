//! `[http2]`: HTTP/2 to clients — h2c, the limits Shellac announces in its SETTINGS, and the
//! bounds of the flood defences.

use super::setting::{Default, Kind, Setting};
use crate::config::units;

pub(super) const HTTP2: &[Setting] = &[
    Setting {
        section: "http2",
        key: "h2c",
        kind: Kind::Listeners,
        default: Default::Value(r##"false"##),
        example: r##""##,
        restart: false,
        doc: r##"Accept HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3) on cleartext listeners: a new connection whose first bytes are the HTTP/2 connection preface (`PRI * HTTP/2.0`…) is served as HTTP/2, every other one as HTTP/1.1 as before. `true`: on every `server.listen` address; a list: only on the listeners named, each written as in `server.listen` (e.g. h2c on an internal `"127.0.0.1:8080"` for a load balancer that speaks h2c, HTTP/1.1 only on the public one); `false`: on none. Where it is off, the preface is refused as an HTTP/1.1 request (`400`). An address that is not in `server.listen` (or is a `[[tls]]` listener's) is a configuration error. The `Upgrade: h2c` dance of HTTP/1.1 is not offered (RFC 9113 deprecates it). On TLS listeners HTTP/2 is chosen by ALPN instead. A reload applies it to connections accepted after it. Counter `h2_conn` (HTTP/2 connections served)."##,
    },
    Setting {
        section: "http2",
        key: "max_concurrent_streams",
        kind: Kind::Count { min: 1, max: 10000 },
        default: Default::Value(r##"100"##),
        example: r##""##,
        restart: false,
        doc: r##"`SETTINGS_MAX_CONCURRENT_STREAMS`: requests one connection may have open at once. A client that opens more has the excess refused (`RST_STREAM REFUSED_STREAM`, counter `h2_rst_sent`; refusals count against `reset_budget`). A stream the client resets stops its request at once (a cache fill it started goes on for the clients waiting on it, as over HTTP/1.1). With `stream_send_buffer` it bounds the response bytes a connection buffers."##,
    },
    Setting {
        section: "http2",
        key: "stream_window",
        kind: Kind::Size {
            min: 65535,
            max: 2_147_483_647,
        },
        default: Default::Value(r##""256KiB""##),
        example: r##""##,
        restart: false,
        doc: r##"`SETTINGS_INITIAL_WINDOW_SIZE`: request body bytes a client may send on one stream before Shellac has passed them on (flow control). A client that sends more breaks flow control: `RST_STREAM FLOW_CONTROL_ERROR`."##,
    },
    Setting {
        section: "http2",
        key: "connection_window",
        kind: Kind::Size {
            min: 65535,
            max: 2_147_483_647,
        },
        default: Default::Value(r##""1MiB""##),
        example: r##""##,
        restart: false,
        doc: r##"The connection's receive window: request body bytes a client may have in flight on all its streams together. With `stream_window` it bounds the request body bytes one connection can make Shellac hold: at most this much whatever the number of streams."##,
    },
    Setting {
        section: "http2",
        key: "max_frame_size",
        kind: Kind::Size {
            min: 16384,
            max: 16_777_215,
        },
        default: Default::Value(r##""16KiB""##),
        example: r##""##,
        restart: false,
        doc: r##"`SETTINGS_MAX_FRAME_SIZE`: the largest frame payload a client may send. A larger frame is a connection error (`GOAWAY FRAME_SIZE_ERROR`). The header list a request may carry is `server.max_header_size` (`SETTINGS_MAX_HEADER_LIST_SIZE`), and its number of fields `server.max_headers`, as for HTTP/1.1."##,
    },
    Setting {
        section: "http2",
        key: "stream_send_buffer",
        kind: Kind::Size {
            min: 16384,
            max: units::MAX_SIZE,
        },
        default: Default::Value(r##""64KiB""##),
        example: r##""##,
        restart: false,
        doc: r##"Response bytes Shellac buffers per stream beyond what the client's flow-control window lets it send: a client that reads slowly, or grants no window, holds at most this much per stream (times `max_concurrent_streams` per connection). When some response waits for the client and no DATA frame could be sent on the connection for `server.send_timeout`, the connection is closed (counter `h2_slow_reader`)."##,
    },
    Setting {
        section: "http2",
        key: "max_requests",
        kind: Kind::Count {
            min: 0,
            max: u64::MAX,
        },
        default: Default::Value(r##"10000"##),
        example: r##""##,
        restart: false,
        doc: r##"Streams one connection may open in its lifetime; after that Shellac sends `GOAWAY` (`NO_ERROR`), finishes the streams it has and the client opens a new connection (as nginx's `keepalive_requests`). Bounds what one connection's HPACK state and counters can accumulate. `0`: no bound. Counter `h2_max_requests`."##,
    },
    Setting {
        section: "http2",
        key: "reset_budget",
        kind: Kind::Count {
            min: 1,
            max: 100_000,
        },
        default: Default::Value(r##"100"##),
        example: r##""##,
        restart: false,
        doc: r##"Stream resets a connection may cause beyond one per completed response: `RST_STREAM` frames from the client (*rapid reset*, CVE-2023-44487) and resets Shellac must send because the client broke a stream's rules (*MadeYouReset*, CVE-2025-8671). Each completed response gives one back, up to this many. Spent: `GOAWAY ENHANCE_YOUR_CALM`, counters `h2_rapid_reset` / `h2_made_you_reset`. h2 acts first when more than 20 streams are reset before Shellac took them (same counter). A browser that cancels some of its requests never gets near it; a client that resets everything it opens is cut off after this many."##,
    },
    Setting {
        section: "http2",
        key: "control_frames_per_second",
        kind: Kind::Count {
            min: 10,
            max: 1_000_000,
        },
        default: Default::Value(r##"1000"##),
        example: r##""##,
        restart: false,
        doc: r##"Frames that carry neither a request nor its body — `PING`, `SETTINGS`, `PRIORITY`, frames of unknown types — a connection may send per second, and in one burst. Beyond: `GOAWAY ENHANCE_YOUR_CALM`, counter `h2_control_flood` (PING / SETTINGS floods: each makes Shellac write an acknowledgement). `WINDOW_UPDATE` is not counted: fast downloads legitimately send many. Empty `DATA` frames are bounded by h2 (100 per connection, then `GOAWAY ENHANCE_YOUR_CALM`, counter `h2_data_flood`)."##,
    },
];
