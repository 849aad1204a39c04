//! `[vcl]`: the policy as a Varnish VCL file instead of `[[rule]]`s (docs/vcl.md).

use super::setting::{Default, FetchTimeout, Kind, ONE_NANOSECOND, Setting};

pub(super) const VCL: &[Setting] = &[
    Setting {
        section: "vcl",
        key: "file",
        kind: Kind::Text("a path to a VCL file"),
        default: Default::Unset(r##"none: the `[[rule]]`s are the policy"##),
        example: r##""/etc/shellac/site.vcl""##,
        restart: false,
        doc: r##"A Varnish VCL file (2.0, 2.1/3.0, 4.0 or 4.1) that is the policy: its subroutines run at the request's steps, followed by its dialect's built-in VCL, and its backends, probes and directors are Shellac's (so `[[backend]]`, `[[probe]]`, `[[director]]`, `[routing]` and `[[rule]]` are not given with it). Relative to this file's directory; `include`s are relative to the including file. Compiled at start and on every reload (a VCL with errors keeps the running one); `shellac check` reports every error with file:line:column. What is supported: docs/vcl.md."##,
    },
    Setting {
        section: "vcl",
        key: "err_unref",
        kind: Kind::Bool,
        default: Default::Value(r##"true"##),
        example: r##""##,
        restart: false,
        doc: r##"A backend, probe, ACL or subroutine the VCL declares but never uses is an error, as with Varnish's `vcc_feature +err_unref` (`unused NAME;` in the file allows one)."##,
    },
    Setting {
        section: "vcl",
        key: "match_limit",
        kind: Kind::Count {
            min: 1,
            max: 100_000_000,
        },
        default: Default::Value(r##"10000"##),
        example: r##""##,
        restart: false,
        doc: r##"Backtracking steps one match of a VCL regular expression may take, as Varnish's `pcre2_match_limit` (same default). Patterns the `regex` crate runs (most) never backtrack and ignore it; those that need PCRE's backtracking (look-ahead, look-behind, back-references, atomic groups) run on a backtracking engine, and a match that goes past the limit fails — `~` is false, `!~` true, `regsub` leaves its subject as it is — and is counted in `vcl_match_limit`, so a pathological pattern costs a bounded amount of CPU per request. docs/vcl.md."##,
    },
    FetchTimeout::Connect.setting(
        "vcl",
        r##"TCP connect timeout of the VCL file's backends that do not set `.connect_timeout`, and what `bereq.connect_timeout` holds until VCL sets it — Varnish's `connect_timeout` parameter (same default). `[[backend]]`s of a TOML configuration have their own."##,
    ),
    FetchTimeout::FirstByte.setting(
        "vcl",
        r##"First-byte timeout of the VCL file's backends that do not set `.first_byte_timeout`, and `bereq.first_byte_timeout`'s default — Varnish's `first_byte_timeout` parameter."##,
    ),
    FetchTimeout::BetweenBytes.setting(
        "vcl",
        r##"Between-bytes timeout of the VCL file's backends that do not set `.between_bytes_timeout`, and `bereq.between_bytes_timeout`'s default — Varnish's `between_bytes_timeout` parameter."##,
    ),
    Setting {
        section: "vcl",
        key: "backend_idle_timeout",
        kind: Kind::Duration {
            min: ONE_NANOSECOND,
        },
        default: Default::Value(r##""60s""##),
        example: r##""##,
        restart: false,
        doc: r##"How long the VCL file's backends keep an idle keep-alive connection for reuse; one idle longer is closed instead (a `[[backend]]`'s `idle_timeout`) — Varnish's `backend_idle_timeout` parameter. Keep it below the origin's own keep-alive timeout, so that Shellac closes an idle connection before the origin does."##,
    },
    Setting {
        section: "vcl",
        key: "max_restarts",
        kind: Kind::Count { min: 0, max: 1000 },
        default: Default::Value(r##"4"##),
        example: r##""##,
        restart: false,
        doc: r##"`return (restart)`s per request at most — Varnish's `max_restarts`: the one past it runs vcl_synth with `503 Too many restarts`, which is delivered whatever it returns. A 2.x program counts as Varnish 2.1 did: once this many restarts are reached, vcl_recv runs and the request then goes to vcl_error (503 unless vcl_recv chose an error), where `req.restarts` reads this number."##,
    },
    Setting {
        section: "vcl",
        key: "max_retries",
        kind: Kind::Count { min: 0, max: 1000 },
        default: Default::Value(r##"4"##),
        example: r##""##,
        restart: false,
        doc: r##"`return (retry)`s of one backend fetch at most (vcl_backend_response, vcl_backend_error) — Varnish's `max_retries`: past it a retry of vcl_backend_response goes to vcl_backend_error (on a `503 Backend fetch failed`, logged as `VCL_Error Too many retries, delivering 503`, as Varnish does), and one of vcl_backend_error fails the fetch with `503 Too many retries` through vcl_synth."##,
    },
];
