//! `[esi]`: Edge Side Includes, parsed once at fetch and assembled at delivery (docs/esi.md).

use std::time::Duration;

use super::setting::{Default, Kind, Setting};

pub(super) const ESI: &[Setting] = &[
    Setting {
        section: "esi",
        key: "disable_xml_check",
        kind: Kind::Bool,
        default: Default::Value(r##"false"##),
        example: r##""##,
        restart: false,
        doc: r##"Parse a body for ESI even when its first non-white byte is not `<` (Varnish's feature `esi_disable_xml_check`). Off: such a body (JSON, a binary) is stored and delivered as it is, with a note in the log. ESI itself is turned on per response by the policy: VCL `set beresp.do_esi = true` (2.x `esi;`) or a rule's `esi = true`."##,
    },
    Setting {
        section: "esi",
        key: "remove_bom",
        kind: Kind::Bool,
        default: Default::Value(r##"false"##),
        example: r##""##,
        restart: false,
        doc: r##"Skip a UTF-8 byte-order mark at the start of a body before the check for `<`, and leave it out of the page (Varnish's feature `esi_remove_bom`)."##,
    },
    Setting {
        section: "esi",
        key: "ignore_other_elements",
        kind: Kind::Bool,
        default: Default::Value(r##"false"##),
        example: r##""##,
        restart: false,
        doc: r##"After a `<` that starts no ESI tag, comment or CDATA, look for the next `<` at once instead of skipping to that element's `>` (Varnish's feature `esi_ignore_other_elements`): an `<esi:include>` written inside another element's attribute, or after a stray `<`, is then processed."##,
    },
    Setting {
        section: "esi",
        key: "max_depth",
        kind: Kind::Count { min: 0, max: 64 },
        default: Default::Value(r##"5"##),
        example: r##""##,
        restart: false,
        doc: r##"Include levels below a client's page (Varnish's `max_esi_depth`): an `<esi:include>` of a fragment at this depth is not fetched (counter `esi_depth_limited`), so an include loop ends here. `0`: pages are parsed and stored, but no include is fetched."##,
    },
    Setting {
        section: "esi",
        key: "max_includes",
        kind: Kind::Count {
            min: 0,
            max: 100000,
        },
        default: Default::Value(r##"256"##),
        example: r##""##,
        restart: false,
        doc: r##"Includes one client page may fetch in all, every level counted; the ones past it are treated as failed fragments (their `alt`, `onerror`; counter `esi_include_limited`)."##,
    },
    Setting {
        section: "esi",
        key: "concurrency",
        kind: Kind::Count { min: 1, max: 1024 },
        default: Default::Value(r##"16"##),
        example: r##""##,
        restart: false,
        doc: r##"Includes of one page (one level) requested at once. They are sent in page order as slots free up and emitted in page order as each becomes available, so the first bytes of the page go out before the last fragment arrives."##,
    },
    Setting {
        section: "esi",
        key: "hosts",
        kind: Kind::Texts("a host name or a list of them"),
        default: Default::Value(r##"[]"##),
        example: r##"["fragments.example.com"]"##,
        restart: false,
        doc: r##"Host names an absolute `src` (`http://host/...`, `https://host/...`) may name besides the page's own host and the configured backends' `host` values. An include naming any other host is refused, never fetched (no SSRF through a page), and counted (`esi_include_refused`): it fails as a fragment does (`alt`, `onerror`). `"*"` allows every host, as Varnish does (the request is still routed to a configured backend, by its `Host`)."##,
    },
    Setting {
        section: "esi",
        key: "late_failure",
        kind: Kind::Choice(&["drop", "abort"]),
        default: Default::Value(r##""drop""##),
        example: r##""##,
        restart: false,
        doc: r##"What a fragment that fails once the page's first bytes went out (its status can no longer change) does after its `alt` failed too: `drop`, it is left out and the page goes on; `abort`, the client's response is cut (the connection closed mid-body), so the client knows the page is incomplete. A failure before the first byte fails the page with `503` unless the include says `onerror="continue"`."##,
    },
    Setting {
        section: "esi",
        key: "include_timeout",
        kind: Kind::Duration {
            min: Duration::from_millis(1),
        },
        default: Default::Value(r##""30s""##),
        example: r##""##,
        restart: false,
        doc: r##"How long one include may take, its whole response (through the cache, a coalesced fetch, the backend), before it counts as failed."##,
    },
    Setting {
        section: "esi",
        key: "surrogate_control",
        kind: Kind::Bool,
        default: Default::Value(r##"false"##),
        example: r##"true"##,
        restart: false,
        doc: r##"Let the origin turn ESI on (W3C Edge Architecture 1.0): every backend request carries `Surrogate-Capability: shellac="ESI/1.0"`, and a response whose `Surrogate-Control` says `content="ESI/1.0"` (to all surrogates, or to `;shellac`) is parsed and assembled as if the policy had turned ESI on. Its other directives for Shellac (`max-age=N[+M]`, `no-store`; `+M` read as `stale-while-revalidate=M`) say how it is stored, as any `Surrogate-Control` does (`cache.targeted_cache_control`); directives for other devices (`;token`) are dropped. `Surrogate-Control` is never sent to clients."##,
    },
];
