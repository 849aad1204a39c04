//! What each Varnish parameter is for Shellac: a setting (with Varnish's default), a knob of
//! Varnish's own machinery with no meaning here, a flag list, or a behaviour Shellac always
//! has. A parameter the table does not name has no equivalent (the file is skipped).

/// How a parameter's value is written.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// Seconds (a plain number, as Varnish shows them, or a duration with a unit).
    Seconds,
    /// A whole number.
    Count,
    /// `on` / `off` (or `true` / `false`).
    Bool,
    /// Bytes (`256`, `8k`, `32k`), at least the Shellac setting's minimum.
    Bytes,
}

/// What a Varnish parameter is here.
pub(super) enum Rule {
    /// A Shellac setting `(section, key)`, with Varnish's default.
    Setting(&'static str, &'static str, Kind, &'static str),
    /// It only shapes Varnish's own log (VSL), which nothing here reads.
    LogOnly,
    /// A knob of Varnish's own machinery (threads, workspaces, pools, its waiter) with no
    /// meaning for Shellac: accepted and ignored (docs/varnishtest.md lists them).
    NoMeaning,
    /// Shellac behaves as this value says and cannot be switched: the value is accepted,
    /// the others have no equivalent.
    Fixed(&'static str),
    /// Shellac behaves as any value above zero says (its bound is its own): those are
    /// accepted, `0` has no equivalent.
    AboveZero,
    /// A list of `+flag`/`-flag`: each one maps to a boolean setting, only concerns Varnish's
    /// log or debugging files, or has no equivalent.
    Flags(&'static [(&'static str, Flag)]),
    /// 2.x-4.0's `esi_syntax` bitmap: 0x1 `esi.disable_xml_check`, 0x2
    /// `esi.ignore_other_elements`, 0x4 parser debug records (log only), 0x8 the parser's
    /// input cut into pieces (no meaning here).
    EsiSyntax,
}

#[derive(Clone, Copy)]
pub(super) enum Flag {
    Setting(&'static str, &'static str),
    LogOnly,
    /// Changes nothing a client or origin sees in Shellac (how Varnish's own parser is fed).
    NoMeaning,
    /// What Shellac always does: `+flag` accepted, `-flag` has no equivalent.
    Always,
    /// A setting with one TOML value for `+flag` and one for `-flag`.
    Choice(&'static str, &'static str, &'static str, &'static str),
}

/// Every Varnish parameter the runner knows, and what it is here.
pub(super) const PARAMS: &[(&str, Rule)] = &[
    (
        "default_ttl",
        Rule::Setting("cache", "default_ttl", Kind::Seconds, "120"),
    ),
    (
        "default_grace",
        Rule::Setting("cache", "grace", Kind::Seconds, "10"),
    ),
    (
        "default_keep",
        Rule::Setting("cache", "keep", Kind::Seconds, "0"),
    ),
    (
        "timeout_idle",
        Rule::Setting("server", "idle_timeout", Kind::Seconds, "5"),
    ),
    (
        "timeout_linger",
        Rule::Setting("server", "idle_release", Kind::Seconds, "0.05"),
    ),
    (
        "idle_send_timeout",
        Rule::Setting("server", "send_timeout", Kind::Seconds, "60"),
    ),
    (
        "connect_timeout",
        Rule::Setting("vcl", "connect_timeout", Kind::Seconds, "3.5"),
    ),
    (
        "first_byte_timeout",
        Rule::Setting("vcl", "first_byte_timeout", Kind::Seconds, "60"),
    ),
    (
        "between_bytes_timeout",
        Rule::Setting("vcl", "between_bytes_timeout", Kind::Seconds, "60"),
    ),
    (
        "max_restarts",
        Rule::Setting("vcl", "max_restarts", Kind::Count, "4"),
    ),
    (
        "max_retries",
        Rule::Setting("vcl", "max_retries", Kind::Count, "4"),
    ),
    (
        "send_timeout",
        Rule::Setting("server", "send_total_timeout", Kind::Seconds, "600"),
    ),
    (
        "http_req_size",
        Rule::Setting("server", "max_header_size", Kind::Bytes, "32k"),
    ),
    (
        "http_req_hdr_len",
        Rule::Setting("server", "max_field_size", Kind::Bytes, "8k"),
    ),
    (
        "http_resp_size",
        Rule::Setting("server", "max_response_header_size", Kind::Bytes, "32k"),
    ),
    (
        "http_resp_hdr_len",
        Rule::Setting("server", "max_response_field_size", Kind::Bytes, "8k"),
    ),
    (
        "pipe_timeout",
        Rule::Setting("server", "tunnel_idle_timeout", Kind::Seconds, "60"),
    ),
    (
        "backend_idle_timeout",
        Rule::Setting("vcl", "backend_idle_timeout", Kind::Seconds, "60"),
    ),
    // How much of a passed response Varnish reads ahead of the client (0: all of it, at the
    // backend's pace): Shellac always streams a passed body at the client's pace, holding
    // the backend connection, with no more than its socket and stream buffers in between.
    ("transit_buffer", Rule::AboveZero),
    (
        "shortlived",
        Rule::Setting("cache", "shortlived", Kind::Seconds, "10"),
    ),
    (
        "uncacheable_ttl",
        Rule::Setting("cache", "hit_for_miss_ttl", Kind::Seconds, "120"),
    ),
    (
        "pcre2_match_limit",
        Rule::Setting("vcl", "match_limit", Kind::Count, "10000"),
    ),
    (
        "http_gzip_support",
        Rule::Setting("compression", "enabled", Kind::Bool, "on"),
    ),
    (
        "gzip_level",
        Rule::Setting("compression", "gzip_level", Kind::Count, "6"),
    ),
    ("gzip_memlevel", Rule::NoMeaning),
    ("gzip_buffer", Rule::NoMeaning),
    ("thread_pools", Rule::NoMeaning),
    ("thread_pool_min", Rule::NoMeaning),
    ("thread_pool_max", Rule::NoMeaning),
    ("thread_pool_reserve", Rule::NoMeaning),
    ("thread_pool_stack", Rule::NoMeaning),
    ("thread_pool_add_delay", Rule::NoMeaning),
    ("thread_pool_timeout", Rule::NoMeaning),
    ("thread_pool_destroy_delay", Rule::NoMeaning),
    ("thread_pool_fail_delay", Rule::NoMeaning),
    ("thread_queue_limit", Rule::NoMeaning),
    ("thread_stats_rate", Rule::NoMeaning),
    ("pool_req", Rule::NoMeaning),
    ("pool_sess", Rule::NoMeaning),
    ("pool_vbo", Rule::NoMeaning),
    ("workspace_thread", Rule::NoMeaning),
    ("workspace_client", Rule::NoMeaning),
    ("workspace_backend", Rule::NoMeaning),
    ("workspace_session", Rule::NoMeaning),
    ("http1_iovs", Rule::NoMeaning),
    ("waiter", Rule::NoMeaning),
    ("rush_exponent", Rule::NoMeaning),
    ("acceptor_sleep_max", Rule::NoMeaning),
    ("acceptor_sleep_incr", Rule::NoMeaning),
    ("acceptor_sleep_decay", Rule::NoMeaning),
    ("thread_pool_watchdog", Rule::NoMeaning),
    ("accept_filter", Rule::NoMeaning),
    ("fetch_chunksize", Rule::NoMeaning),
    ("fetch_maxchunksize", Rule::NoMeaning),
    ("vcl_cooldown", Rule::NoMeaning),
    // How long varnishd's manager waits for its child's answer to a CLI command.
    ("cli_timeout", Rule::NoMeaning),
    ("vcl_trace", Rule::LogOnly),
    ("diag_bitmap", Rule::LogOnly),
    ("vsl_mask", Rule::LogOnly),
    ("vsl_reclen", Rule::LogOnly),
    ("syslog_cli_traffic", Rule::LogOnly),
    ("http_range_support", Rule::Fixed("on")),
    (
        "max_esi_depth",
        Rule::Setting("esi", "max_depth", Kind::Count, "5"),
    ),
    ("esi_syntax", Rule::EsiSyntax),
    (
        "debug",
        Rule::Flags(&[
            ("syncvsl", Flag::LogOnly),
            ("waitinglist", Flag::LogOnly),
            ("workspace", Flag::LogOnly),
            ("witness", Flag::LogOnly),
            ("vclrel", Flag::LogOnly),
            ("lurker", Flag::LogOnly),
            ("vcl_keep", Flag::LogOnly),
            ("vmod_so_keep", Flag::LogOnly),
            ("vsm_keep", Flag::LogOnly),
            // Feeds Varnish's ESI parser a byte at a time; Shellac's gives the same program
            // however its input is cut (esi/parse.rs's tests, the fuzz target).
            ("esi_chop", Flag::NoMeaning),
        ]),
    ),
    (
        "feature",
        Rule::Flags(&[
            ("http2", Flag::Setting("http2", "h2c")),
            ("no_coredump", Flag::LogOnly),
            ("trace", Flag::LogOnly),
            ("short_panic", Flag::LogOnly),
            (
                "esi_disable_xml_check",
                Flag::Setting("esi", "disable_xml_check"),
            ),
            ("esi_remove_bom", Flag::Setting("esi", "remove_bom")),
            (
                "esi_ignore_other_elements",
                Flag::Setting("esi", "ignore_other_elements"),
            ),
            // `https://` includes fetched as any include (Varnish: as http, with it on).
            ("esi_ignore_https", Flag::Always),
            // An include failing without `onerror="continue"` after the page's first byte
            // aborts the page (Varnish without it: the page goes on).
            (
                "esi_include_onerror",
                Flag::Choice("esi", "late_failure", "\"abort\"", "\"drop\""),
            ),
        ]),
    ),
];
