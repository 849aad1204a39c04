//! `[cache]`, `[storage]` / `[storage.disk]` and `[invalidation]`: the tiers, the TTL policy
//! and what may remove objects.

use std::time::Duration;

use super::setting::{Default, Kind, Setting};
use crate::config::units;

pub(super) const CACHE: &[Setting] = &[
    Setting {
        section: "cache",
        key: "memory_size",
        kind: Kind::Size {
            min: 64 << 10,
            max: units::MAX_SIZE,
        },
        default: Default::Value(r##""256MiB""##),
        example: r##""##,
        restart: true,
        doc: r##"Bound on the memory tier, charged what it holds. A small object (one in-memory body of ≤ 2 KiB) is kept compact: one slab slot with its key, header fields and body and ~80 bytes of bookkeeping, rounded up to 16 bytes (~120 bytes per object beyond what it stores, including the index; bench/RESULTS.md). The first hit builds the object the pipeline serves from and keeps it too: from then on the object is also charged its weight (a fixed 528 bytes and ~96 bytes per header field, for the maps and the wire form a hit may build, plus its fields and body copy); if that takes the tier over the bound, other objects are evicted at once. Larger objects are charged their weight from the start. The index's tables are charged as allocated. Beyond the bound objects are evicted (CLOCK with 2-bit use counts: objects that are hit outlive a scan of one-time URLs); counter `n_lru_nuked`. `cache_bytes` is what is charged now, `cache_slab_bytes` what the slabs hold. A stored body is copied into one allocation of exactly its size (from 64 KiB on, an anonymous mapping of its own, charged in whole pages and given back to the kernel when the object is evicted; such a body goes to a cleartext HTTP/1.1 client without a copy, its pages lent to the socket through a pipe: counters `splice_bytes`, `splice_fallback`, gauge `n_splice_pipe`, [static-files.md](static-files.md#sending-sendfile-on-cleartext-http11)), and the allocator's blocks of 64 KiB or more (a fill's read buffers) are returned when freed, so RSS stays within about 1.1× of it plus the process's base with objects of 100 KB and more, and about 1.15× with small ones (measured 0.98–1.01× with 100 KB and 1 MB objects, 1.06–1.14× with 2 KB objects, the higher figures with every core busy; a debug build on a machine oversubscribed six to eight times, load 12–17 on 2 cores, reached 1.22–1.37× with 2 KB objects; bench/RESULTS.md, `tests/memory_bound.rs`). The price: ~1.8× the CPU per miss of a 100 KB–1 MB object (page faults of fresh mappings); hits are unaffected. Partial content (206 pieces of Range requests, [policy.md](policy.md#partial-content)) is held beside it, up to an eighth of it more."##,
    },
    Setting {
        section: "cache",
        key: "max_object_size",
        kind: Kind::Size {
            min: 0,
            max: units::MAX_SIZE,
        },
        default: Default::Value(r##""64MiB""##),
        example: r##""##,
        restart: true,
        doc: r##"Largest object stored. Larger responses (by Content-Length, or once the streamed body passes the limit) go to the client uncached (`detail=too-large`). At most `memory_size`, or with a disk tier at most the larger of `memory_size` and `storage.disk.region_size - 64KiB`; Shellac may lower it to what the tiers can hold (memory: one shard, `memory_size / shards`; disk: one region). Objects too large for memory live on disk only."##,
    },
    Setting {
        section: "cache",
        key: "default_ttl",
        kind: Kind::Duration {
            min: Duration::ZERO,
        },
        default: Default::Value(r##""0s""##),
        example: r##""##,
        restart: false,
        doc: r##"Freshness for responses with a heuristically cacheable status short of 5xx (200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414) and no freshness information at all (no `s-maxage`, `max-age`, `Expires`, usable `Last-Modified`). `0s` follows RFC 9111: such responses are not reused. Like Apache's `CacheDefaultExpire`."##,
    },
    Setting {
        section: "cache",
        key: "max_ttl",
        kind: Kind::Duration {
            min: Duration::ZERO,
        },
        default: Default::Unset(r##"none"##),
        example: r##""1d""##,
        restart: false,
        doc: r##"Upper clamp on every TTL (origin-given, heuristic or default). Like `CacheMaxExpire`. Must not be shorter than `default_ttl`."##,
    },
    Setting {
        section: "cache",
        key: "heuristic_percent",
        kind: Kind::Count { min: 0, max: 100 },
        default: Default::Value(r##"10"##),
        example: r##""##,
        restart: false,
        doc: r##"RFC 9111 §4.2.2 heuristic: this percentage of `Date − Last-Modified` when the response has no explicit lifetime. 0 disables. Like `CacheLastModifiedFactor 0.1`."##,
    },
    Setting {
        section: "cache",
        key: "grace",
        kind: Kind::Duration {
            min: Duration::ZERO,
        },
        default: Default::Value(r##""0s""##),
        example: r##""##,
        restart: false,
        doc: r##"Grace (stale-while-revalidate): an object up to this long past its TTL is delivered at once (`Cache-Status: shellac; hit; ttl=-N; detail=stale-while-revalidate`, counter `cache_grace_hit`) while one background fetch refreshes it (`cache_refresh`). A response's `stale-while-revalidate=N` (RFC 5861) sets it per object. `0s` follows RFC 9111 §4.2.4: no stale responses without permission. Never for `must-revalidate`, `proxy-revalidate` or `s-maxage` responses."##,
    },
    Setting {
        section: "cache",
        key: "keep",
        kind: Kind::Duration {
            min: Duration::ZERO,
        },
        default: Default::Value(r##""1h""##),
        example: r##""##,
        restart: false,
        doc: r##"How long past TTL + grace a stale object is kept usable: for conditional revalidation with the backend (`If-None-Match` / `If-Modified-Since`; a 304 refreshes it, counter `cache_revalidated`; a copy purged or banned while the backend was asked is not refreshed but fetched again, counter `cache_revalidated_gone`), and to answer when no backend can be reached (all sick, refused, timed out: `detail=stale-<why>`, counter `cache_stale_served`; RFC 9111 §4.2.4 "disconnected"). A backend 5xx is answered with the stale copy only if the response said `stale-if-error=N` (RFC 5861). Objects are not removed when they expire, so keep costs no extra memory; they go when evicted or replaced."##,
    },
    Setting {
        section: "cache",
        key: "request_cache_control",
        kind: Kind::Bool,
        default: Default::Value(r##"false"##),
        example: r##""##,
        restart: false,
        doc: r##"Honour request `Cache-Control` (`no-cache`, `max-age`, `min-fresh`, `max-stale`, `only-if-cached` → 504) and `Pragma: no-cache`. Off by default, as in Varnish: clients cannot force backend traffic."##,
    },
    Setting {
        section: "cache",
        key: "targeted_cache_control",
        kind: Kind::Texts("a list of header field names"),
        default: Default::Value(r##"["CDN-Cache-Control", "Surrogate-Control"]"##),
        example: r##""##,
        restart: false,
        doc: r##"Targeted fields (RFC 9213) used instead of `Cache-Control` and `Expires` for storage and freshness, the first present with a valid value wins. Each is read as a Structured Field Dictionary (one that does not parse is ignored whole; a member of the wrong type, e.g. `max-age="60"` or `max-age=60.0`, is ignored), except `Surrogate-Control`, read like `Cache-Control`. `Surrogate-Control` is never sent to clients."##,
    },
    Setting {
        section: "cache",
        key: "normalize_accept_encoding",
        kind: Kind::Bool,
        default: Default::Value(r##"true"##),
        example: r##""##,
        restart: false,
        doc: r##"Rewrite `Accept-Encoding` before lookup to the coding the client gets — `zstd`, `br`, `gzip` or nothing (identity), read with q-values, `q=0` refusals and `*` — so clients that spell it differently share one `Vary` variant (at most one per coding). What a backend is asked for is `[compression]`'s: a cache fill asks for gzip, a pass for the codings the client takes."##,
    },
    Setting {
        section: "cache",
        key: "max_variants",
        kind: Kind::Count { min: 1, max: 256 },
        default: Default::Value(r##"16"##),
        example: r##""##,
        restart: true,
        doc: r##"`Vary` variants kept per URL; the oldest is dropped."##,
    },
    Setting {
        section: "cache",
        key: "deception_armor",
        kind: Kind::Bool,
        default: Default::Value(r##"true"##),
        example: r##""##,
        restart: false,
        doc: r##"Cache deception armor: a rule's `ttl`, `min_ttl` and `override_origin` apply only when the response's `Content-Type` fits the extension the URL claims (`.css` → `text/css`, `.png` → `image/png`, ...; `application/octet-stream` fits any; an unknown extension fits anything but HTML), so `/account.php/x.css` answered with a private page is never stored by a static-files rule. Counter `cache_deception_armor`. See SECURITY.md, "Web cache deception"."##,
    },
    Setting {
        section: "cache",
        key: "hit_for_miss_ttl",
        kind: Kind::Duration {
            min: Duration::ZERO,
        },
        default: Default::Value(r##""120s""##),
        example: r##""##,
        restart: false,
        doc: r##"When a URL's response was uncacheable, later requests for it skip coalescing (go straight to the backend, in parallel) for this long. A cacheable response clears the mark. Under VCL it is `param.uncacheable_ttl`, the `beresp.ttl` the built-in VCL gives an uncacheable response (Varnish's `uncacheable_ttl`)."##,
    },
    Setting {
        section: "cache",
        key: "refresh_ahead",
        kind: Kind::Text(
            "\"off\", a share of the TTL such as \"10%\", or a duration such as \"30s\"",
        ),
        default: Default::Value(r##""off""##),
        example: r##""10%""##,
        restart: false,
        doc: r##"Refresh-ahead (Varnish's `obj.prefetch`, Akamai's prefresh): a fresh object requested within this much of its expiry is delivered from the cache and refreshed in the background — one refresh at a time per object, revalidated with its `ETag` / `Last-Modified`, with the rules and route of the request that started it; not while the URL is marked uncacheable (hit-for-miss). A share of the object's TTL (`"10%"`: its last tenth; 1–99 %) or a duration (`"30s"`); `"off"`, `false` or `"0s"` turn it off. A 2.0 VCL file's `set obj.prefetch = -30s;` in vcl_fetch gives an object a window of its own, which wins over this one ([vcl.md](vcl.md)). Counter `cache_refresh_ahead`."##,
    },
    Setting {
        section: "cache",
        key: "shortlived",
        kind: Kind::Duration {
            min: Duration::ZERO,
        },
        default: Default::Value(r##""0s""##),
        example: r##""10s""##,
        restart: false,
        doc: r##"Varnish's `shortlived`: an object whose freshness left, grace and keep add up to less than this is transient — kept in the memory tier only, never written to the disk tier (`[storage.disk]`) nor the shared tier (`[storage.shared]`), as Varnish keeps such objects in its Transient storage; with neither tier configured it changes nothing. VCL's `beresp.storage = storage.Transient` (`beresp.storage_hint = "Transient"`, 3.0 `set beresp.storage = "Transient"`) does the same for one object ([vcl.md](vcl.md)). `"0s"` (the default) makes no object transient by its lifetime; Varnish's default is `"10s"`. Counters `disk_transient`, `shared_write_skip`."##,
    },
    Setting {
        section: "cache",
        key: "slice",
        kind: Kind::Bool,
        default: Default::Value(r##"true"##),
        example: r##""##,
        restart: false,
        doc: r##"Big media in slices (nginx's `slice` module, ATS's slice plugin): a GET whose response turns out longer than `max_object_size` (its `Content-Length`, or the complete length in the `Content-Range` of a forwarded Range), storable, without `Vary` and with a strong validator (a strong `ETag`, else a `Last-Modified` at least 60 s older than its `Date`) is passed through once, and from then on every request for the URL is answered from aligned slices of `slice_size` bytes, each a cache object of its own (memory and disk tiers, evicted like any object) fetched with `Range: bytes=a-b` on a miss and coalesced like any miss: a seek costs one slice. A slice whose validator or length differs from the first's invalidates every slice of the URL (never mixed versions: a client response not yet begun is restarted, one under way is cut); an origin that answers a slice request with 200 is passed through and the URL is not sliced for `hit_for_miss_ttl`. A Range starting at or beyond `max_object_size` of a URL not known yet is asked as its slice at once. Counters `slice_*`; [slices.md](slices.md)."##,
    },
    Setting {
        section: "cache",
        key: "slice_size",
        kind: Kind::Size {
            min: 1 << 20,
            max: 8 << 20,
        },
        default: Default::Value(r##""1MiB""##),
        example: r##""4MiB""##,
        restart: false,
        doc: r##"The size of one slice of a big object (`slice`), 1–8 MiB; slices are aligned to it (slice n is bytes n × `slice_size` to (n + 1) × `slice_size` − 1). Larger slices mean fewer origin requests and objects, smaller ones less fetched beyond what a seek reads. A `slice_size` above the effective `max_object_size` turns slicing off. Changing it makes slices stored with the old size unreachable (they age out)."##,
    },
];

/// `[[storage.named]]`: named storages within the memory tier (`cache/stores.rs`).
pub(super) const STORAGE_NAMED: &[Setting] = &[
    Setting {
        section: "storage.named",
        key: "name",
        kind: Kind::Text("a storage name"),
        default: Default::Required,
        example: r##""images""##,
        restart: false,
        doc: r##"The storage's name, as VCL names it (`beresp.storage = storage.images;`) and a rule's `storage` does. Letters, digits, `_` and `-`, starting with a letter; unique, letter case ignored. `Transient` is Varnish's storage of transient objects (`cache.shortlived`, VCL's `storage.Transient`, memory only), which always exists: declaring it gives it a size. `s0` is the memory tier itself, refused as a name. At most 14 names besides `Transient`."##,
    },
    Setting {
        section: "storage.named",
        key: "size",
        kind: Kind::Size {
            min: 1,
            max: units::MAX_SIZE,
        },
        default: Default::Unset(r##"none: bounded by `cache.memory_size` alone"##),
        example: r##""256MiB""##,
        restart: false,
        doc: r##"The bytes the storage's objects may take in the memory tier, each charged as `cache.memory_size` counts it. A store that takes the storage over its size evicts its own least used objects first; an object larger than the size is not kept in memory. Sizes are caps within `cache.memory_size`, not memory of their own: a size larger than `cache.memory_size` is refused by `shellac check`. An object in a named storage is charged to it, not to its site's `cache_share`. A reload applies a changed size as the storage's next objects are stored."##,
    },
];

pub(super) const STORAGE: &[Setting] = &[
    Setting {
        section: "storage",
        key: "named",
        kind: Kind::Table {
            section: "storage.named",
        },
        default: Default::Unset(r##"none: `s0` (the memory tier) and `Transient`"##),
        example: r##"[{ name = "images", size = "256MiB" }]"##,
        restart: false,
        doc: r##"Named storages within the memory tier (Varnish's `-s NAME=malloc,SIZE`): `[[storage.named]]` tables, below."##,
    },
    Setting {
        section: "storage",
        key: "disk",
        kind: Kind::Table {
            section: "storage.disk",
        },
        default: Default::Unset(r##"none: memory only"##),
        example: r##"{ path = "/var/cache/shellac/cache.dat", size = "10GiB" }"##,
        restart: true,
        doc: r##"The persistent disk tier below the memory tier: the table below. Without it Shellac caches in memory only."##,
    },
    Setting {
        section: "storage.disk",
        key: "path",
        kind: Kind::Text("a file path"),
        default: Default::Required,
        example: r##""/var/cache/shellac/cache.dat""##,
        restart: true,
        doc: r##"The data file. Created if missing and preallocated to `size` (`fallocate`), so a full filesystem shows at start-up, not while serving. Its directory must exist; a directory is refused. Locked while Shellac runs (a second instance on the same file cannot open it: see `on_open_error`). One file whatever the number of objects. `shellac check` tests that the directory exists and takes new files, that the file is a regular file Shellac can read and write, and that the filesystem has room for the preallocation."##,
    },
    Setting {
        section: "storage.disk",
        key: "size",
        kind: Kind::Size {
            min: 0,
            max: units::MAX_SIZE,
        },
        default: Default::Required,
        example: r##""10GiB""##,
        restart: true,
        doc: r##"Size of the data file's regions: the bound on the disk tier (the file is 2 MiB + 4 KiB larger: a superblock and two copies of the persisted ban list). At least 4 regions and at most 65536. Changing it (or `region_size`) starts with an empty disk cache (`disk_reset`)."##,
    },
    Setting {
        section: "storage.disk",
        key: "region_size",
        kind: Kind::Size {
            min: 1 << 20,
            max: 1 << 30,
        },
        default: Default::Value(r##""64MiB""##),
        example: r##""##,
        restart: true,
        doc: r##"The unit of writing and of reclaim: when the disk is full a whole region is reclaimed (one with nothing live, else the oldest), never a scan of objects. The largest object on disk is `region_size - 64KiB`. A multiple of 4 KiB."##,
    },
    Setting {
        section: "storage.disk",
        key: "admission",
        kind: Kind::Choice(&["second-request", "always"]),
        default: Default::Value(r##""second-request""##),
        example: r##""##,
        restart: true,
        doc: r##"Which objects are written to disk. `second-request`: an object is written when its key is stored again after a recent fetch that was not admitted, or when the memory tier evicts it after at least one memory hit; one-hit wonders never cost a disk write (counter `disk_admit_skip`). `always`: every stored object is written too (write-through; after a restart everything stored before is there); an object the writer refused because it was behind (`disk_reject`) is offered again when the memory tier evicts it."##,
    },
    Setting {
        section: "storage.disk",
        key: "on_open_error",
        kind: Kind::Choice(&["refuse", "memory-only"]),
        default: Default::Value(r##""refuse""##),
        example: r##""##,
        restart: true,
        doc: r##"What start-up does when the data file cannot be opened, locked or preallocated (missing or read-only directory, no room, another process holding it). `"refuse"`: `shellac serve` exits with the reason (the operator asked for persistence). `"memory-only"`: Shellac serves from the memory tier alone; the error is logged, `disk_io_error` counted and the start-up line says `disk cache at PATH NOT running`."##,
    },
];

pub(super) const INVALIDATION: &[Setting] = &[
    Setting {
        section: "invalidation",
        key: "purge_from",
        kind: Kind::Networks,
        default: Default::Value(r##"["127.0.0.0/8", "::1"]"##),
        example: r##""##,
        restart: false,
        doc: r##"Client networks allowed to send `PURGE` (others get 405, counter `purge_denied`). `[]` disables PURGE."##,
    },
    Setting {
        section: "invalidation",
        key: "max_bans",
        kind: Kind::Count {
            min: 1,
            max: 1000000,
        },
        default: Default::Value(r##"10000"##),
        example: r##""##,
        restart: true,
        doc: r##"Active bans at most (including those read back from the disk tier at start-up); adding more answers 503 until the sweeper retires old ones."##,
    },
    Setting {
        section: "invalidation",
        key: "ban_sweep_interval",
        kind: Kind::Duration {
            min: Duration::from_millis(100),
        },
        default: Default::Value(r##""10s""##),
        example: r##""##,
        restart: false,
        doc: r##"How often the background sweeper walks the memory tier for banned objects and retires bans. With a disk tier (which it does not read: objects on disk are checked when read), a ban is retired once the walk is complete and nothing on disk older than it can still be served (reclaimed or expired)."##,
    },
    Setting {
        section: "invalidation",
        key: "unsafe_requests_invalidate",
        kind: Kind::Bool,
        default: Default::Unset(r##"true under `[[rule]]`s, false under `[vcl]`"##),
        example: r##"false"##,
        restart: false,
        doc: r##"Whether a request with an unsafe method (POST, PUT, DELETE, PATCH, any unknown method) that is passed or piped to the backend and answered 2xx or 3xx evicts the cached URL and the same-host `Location` / `Content-Location` URLs (RFC 9111 §4.4; counter `cache_invalidated`). Under `[[rule]]`s it does unless this says `false`. Under `[vcl]` it does not unless this says `true`: Varnish never changes the cache on a pass or a pipe — only the VCL's purges and bans do — and a VCL's purge ACL would otherwise be bypassed (any client could evict any page by POSTing to it)."##,
    },
];
