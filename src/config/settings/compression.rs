//! `[compression]`: gzip once at fetch and store compressed, gunzip on delivery for clients
//! without gzip (docs/compression.md).

use super::setting::{Default, Kind, Setting};

pub(super) const COMPRESSION: &[Setting] = &[
    Setting {
        section: "compression",
        key: "enabled",
        kind: Kind::Bool,
        default: Default::Value(r##"true"##),
        example: r##""##,
        restart: false,
        doc: r##"Negotiate content codings, as Varnish's `http_gzip_support`: cache fills ask the origin for `Accept-Encoding: gzip`; a compressible identity body (`types`, at least `min_length`) is gzipped once as it is fetched and stored compressed (its `ETag` weakened); an origin's gzip is stored as it came, checked as it streams (a malformed one is not stored, counter `compress_gzip_invalid`); a client that does not take gzip gets stored gzip decoded as it is sent (counter `compress_gunzip`) until the object is hot (`hot_hits` such hits): then an identity representation built in the background, kept in the same tiers and purged with it, serves those clients as stored (counter `compress_identity`), and every such response carries `Vary: Accept-Encoding`. The cache key holds one variant per URL for all of them, whatever the clients' `Accept-Encoding`. Responses with `Cache-Control: no-transform` are never changed. `false`: bodies are stored and delivered as the origin sent them."##,
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
    Setting {
        section: "compression",
        key: "levels",
        kind: Kind::FieldTable("a table of media type = gzip level (1-9)"),
        default: Default::Value(r##"{}"##),
        example: r##"{ "text/html" = 9, "application/json" = 4, "text/*" = 5 }"##,
        restart: false,
        doc: r##"gzip level per media type, over `gzip_level`: patterns as in `types` (exact, `type/*`, `*+suffix`); the most specific (longest) pattern that matches a body's `Content-Type` wins. Levels outside 1-9 are a configuration error."##,
    },
    Setting {
        section: "compression",
        key: "encodings",
        kind: Kind::Texts("a list of `br` and `zstd`"),
        default: Default::Value(r##"["zstd", "br"]"##),
        example: r##""##,
        restart: false,
        doc: r##"Codings a hot stored object (a gzip Shellac made or kept, under rules or VCL; or an identity object `types` and `min_length` would gzip now, which gets gzip too) also gets a representation in, built in the background after `hot_hits` hits by clients that prefer it, never on the request path: brotli at `br_level`, zstd at `zstd_level` with a window of at most 8 MB (RFC 9659). Kept in the same tiers as the object (read back from disk when memory has none), purged with it, served while the object they were made from is (counters `compress_br`, `compress_zstd`, `compress_encoded_served`, `compress_encoded_read_back`, `compress_encode_dropped`). A client gets the coding it prefers among those at hand (its q-values; ties: zstd, br, gzip). Clients that take one of them leave the fast-hit path for stored gzip objects. `[]`: none built."##,
    },
    Setting {
        section: "compression",
        key: "hot_hits",
        kind: Kind::Count {
            min: 1,
            max: 1_000_000,
        },
        default: Default::Value(r##"2"##),
        example: r##""##,
        restart: false,
        doc: r##"Hits on a stored object by clients that prefer one of `encodings` (or, for a stored gzip object, clients that take no gzip) before its representation in that coding (identity) is queued to be built (counted per object and coding in a bounded table, so a rarely asked object is never compressed again)."##,
    },
    Setting {
        section: "compression",
        key: "br_level",
        kind: Kind::Count { min: 1, max: 11 },
        default: Default::Value(r##"11"##),
        example: r##""##,
        restart: false,
        doc: r##"Brotli quality of the background representations, 1 (fastest) to 11 (smallest; ~1-2 MB/s, which is why it is never done on the request path)."##,
    },
    Setting {
        section: "compression",
        key: "zstd_level",
        kind: Kind::Count { min: 1, max: 19 },
        default: Default::Value(r##"19"##),
        example: r##""##,
        restart: false,
        doc: r##"zstd level of the background representations, 1 (fastest) to 19 (smallest). The window is at most 8 MB whatever the level, as RFC 9659 requires of `zstd` on the web (browsers refuse a larger one)."##,
    },
    Setting {
        section: "compression",
        key: "queue",
        kind: Kind::Count {
            min: 1,
            max: 100_000,
        },
        default: Default::Value(r##"64"##),
        example: r##""##,
        restart: false,
        doc: r##"Representations waiting to be built, at most (one is built at a time, off the request path); one more is dropped and counted (`compress_encode_dropped`), and queued again by later hits."##,
    },
];
