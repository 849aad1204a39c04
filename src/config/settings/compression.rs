//! `[compression]`: gzip once at fetch and store compressed, gunzip on delivery for clients
//! without gzip (docs/compression.md).

use super::{Default, Kind, Setting};

pub(super) const COMPRESSION: &[Setting] = &[
    Setting {
        section: "compression",
        key: "enabled",
        kind: Kind::Bool,
        default: Default::Value(r##"true"##),
        example: r##""##,
        restart: false,
        doc: r##"Negotiate content codings, as Varnish's `http_gzip_support`: cache fills ask the origin for `Accept-Encoding: gzip`; a compressible identity body (`types`, at least `min_length`) is gzipped once as it is fetched and stored compressed (its `ETag` weakened); an origin's gzip is stored as it came, checked as it streams (a malformed one is not stored, counter `compress_gzip_invalid`); a client that does not take gzip gets stored gzip decoded as it is sent (counter `compress_gunzip`), and every such response carries `Vary: Accept-Encoding`. The cache key holds one variant per URL for all of them, whatever the clients' `Accept-Encoding`. Responses with `Cache-Control: no-transform` are never changed. `false`: bodies are stored and delivered as the origin sent them."##,
    },
    Setting {
        section: "compression",
        key: "types",
        kind: Kind::Texts("a list of media types"),
        default: Default::Value(
            r##"["text/*", "application/json", "*+json", "application/javascript", "application/x-javascript", "application/ecmascript", "application/xml", "*+xml", "application/wasm", "font/ttf", "font/otf", "font/collection", "application/vnd.ms-fontobject"]"##,
        ),
        example: r##""##,
        restart: false,
        doc: r##"Media types gzipped at fetch: exact (`application/json`), a top-level type (`text/*`) or a structured-syntax suffix (`*+json`, `*+xml`: SVG, Atom, JSON-LD...), compared without parameters and letter case. Types that are compressed already (images, video, `font/woff2`, archives) are not in the default list."##,
    },
    Setting {
        section: "compression",
        key: "min_length",
        kind: Kind::Size {
            min: 0,
            max: 1 << 30,
        },
        default: Default::Value(r##""512B""##),
        example: r##""##,
        restart: false,
        doc: r##"Identity bodies whose `Content-Length` is below this are stored as they came: gzip's header and trailer (18 bytes) and the extra round of decoding gain nothing on them. A body without `Content-Length` (chunked) is gzipped whatever its length."##,
    },
    Setting {
        section: "compression",
        key: "gzip_level",
        kind: Kind::Count { min: 1, max: 9 },
        default: Default::Value(r##"6"##),
        example: r##""##,
        restart: false,
        doc: r##"gzip level of bodies Shellac compresses, 1 (fastest) to 9 (smallest). Each body is compressed once, when it is fetched, not per request."##,
    },
];
