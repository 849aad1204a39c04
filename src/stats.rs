//! Counters, declared once (name + one-line description), in the style of varnishstat.
//!
//! The hot path only does relaxed atomic increments; each counter sits on its own cache line so
//! workers do not fight over one. Formatting happens at scrape time (`/stats`).

mod counter;
mod pass;

pub use counter::{
    Counter, Histogram, LATENCY_BOUNDS_US, LATENCY_BUCKETS, TTFB_DESCRIPTION, quantile_us,
};
pub use pass::{PASS_REASONS, PassReasons};

macro_rules! counters {
    ($(#[$meta:meta])* struct $type:ident {
        $( $name:ident : $desc:literal ),* $(,)?
        $( ; $( #[doc = $fdoc:literal] $field:ident : $fty:ty ),* $(,)? )?
    }) => {
        $(#[$meta])*
        #[derive(Default, Debug)]
        pub struct $type {
            $( #[doc = $desc] pub $name: Counter, )*
            $( $( #[doc = $fdoc] pub $field: $fty, )* )?
        }

        impl $type {
            /// (name, description) for every counter, in declaration order.
            pub const DESCRIPTIONS: &'static [(&'static str, &'static str)] =
                &[ $( (stringify!($name), $desc), )* ];

            /// (name, value) for every counter, in declaration order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![ $( (stringify!($name), self.$name.get()), )* ]
            }

            /// Adds every counter of `other` to this one's (what a piece of work counted
            /// before the process's counters existed).
            pub fn add_all(&self, other: &$type) {
                $( self.$name.add(other.$name.get()); )*
            }
        }
    };
}

counters! {
    /// Every process-wide counter Shellac keeps. See [`Counters::DESCRIPTIONS`].
    struct Counters {
    client_conn: "Client connections accepted",
    client_conn_near: "Client connections given server.near_send_buffer (their handshake round trip was at most server.near_rtt)",
    client_req: "Client requests received",
    client_req_400: "Client requests rejected as malformed (400)",
    client_idle_closed: "Client connections closed after idle_timeout",
    client_idle_released: "Keep-alive client connections that gave back their buffers and request state after idle_release (rebuilt when the next request arrives)",
    mem_trim: "Times freed session memory was returned to the operating system (malloc_trim) after at least 1,000 released connections",
    mem_trim_usec: "Microseconds spent returning freed memory to the operating system (mem_trim)",
    client_header_timeout: "Client connections closed by header_read_timeout",
    tls_handshake: "TLS handshakes completed on client listeners",
    tls_handshake_resumed: "Of those, resumed sessions (ticket or session ID: no certificate sent, no signature made)",
    tls_handshake_fail: "TLS handshakes that failed on client listeners (the tls_handshake_fail_* counters say why)",
    tls_handshake_fail_timeout: "TLS handshakes not finished within tls.handshake_timeout",
    tls_handshake_fail_eof: "TLS handshakes the client abandoned (closed the connection)",
    tls_handshake_fail_not_tls: "Connections to a TLS listener that did not start with a TLS handshake (plain HTTP, scanners)",
    tls_handshake_fail_version: "TLS handshakes refused for the protocol version (below tls.min_version, or SSL)",
    tls_handshake_fail_cipher: "TLS handshakes with no cipher suite, key exchange or signature scheme in common",
    tls_handshake_fail_alpn: "TLS handshakes whose ALPN offer held no protocol the listener serves",
    tls_handshake_fail_no_certificate: "TLS handshakes refused for want of a certificate (unknown server name with tls.unknown_name = refuse, or no key the client can verify)",
    tls_handshake_fail_client_cert: "TLS handshakes refused because the client certificate was missing (tls.client_auth = required) or did not verify (revoked ones excepted)",
    tls_handshake_fail_client_cert_revoked: "TLS handshakes refused because a revocation list (tls.client_crl) revokes the client certificate",
    tls_handshake_fail_peer_alert: "TLS handshakes the client ended with an alert (e.g. it did not trust the certificate)",
    tls_handshake_fail_protocol: "TLS handshakes that failed for another protocol error",
    tls_handshake_fail_io: "TLS handshakes that failed on a transport error",
    tls_reload: "Times the TLS certificates and keys were loaded again (reload or changed files)",
    backend_tls_handshake: "TLS handshakes completed with backends ([[backend]] tls)",
    backend_tls_fail: "TLS handshakes with backends that failed (certificate not trusted or not for the name, no common protocol; also counted in backend_fail)",
    backend_tls_reload: "Backends whose TLS files (ca, cert, key) changed on disk and were loaded for new connections",
    backend_tls_reload_error: "Backends whose TLS files changed on disk but did not load (the ones in use were kept)",
    tls_reload_error: "Times TLS files that changed on disk could not be loaded (the running certificates were kept)",
    acme_loaded: "ACME certificates loaded from tls.acme.state_dir (at start, or when a reload adds [[tls.acme]])",
    acme_order: "ACME orders placed (first certificates and renewals)",
    acme_issued: "Certificates obtained from an ACME server and put in service",
    acme_renewed: "Of those, renewals (a certificate for the names was already in service)",
    acme_fail: "ACME attempts that failed; each is tried again after tls.acme.retry_min, doubling up to retry_max, while the last good certificate stays in service (the acme_fail_* counters say why)",
    acme_fail_network: "ACME attempts that failed because the ACME server could not be reached or did not answer (connection, TLS, timeout of a request)",
    acme_fail_account: "ACME attempts that failed to create, load or update the ACME account",
    acme_fail_rejected: "ACME attempts the ACME server refused (an error document: rate limits, policy, a malformed request)",
    acme_fail_validation: "ACME attempts whose challenge failed (the ACME server could not reach this listener, or got a wrong answer)",
    acme_fail_timeout: "ACME attempts abandoned because the order did not become ready or valid in time",
    acme_fail_storage: "ACME attempts that failed to write tls.acme.state_dir (the certificate was not put in service)",
    acme_fail_certificate: "ACME attempts whose certificate was unusable (not matching its key, not covering the names)",
    acme_challenge_http: "HTTP-01 challenge requests answered (/.well-known/acme-challenge/TOKEN)",
    client_req_unknown_site: "Requests for a host no [[site]] of their listen address names, where none is the default (answered server.unknown_site_status, 421)",
    rewrite: "Requests whose target a rewrite line changed (before the cache key)",
    rewrite_redirect: "Requests a rewrite line answered with a redirect (redirect, permanent, or an absolute result)",
    rewrite_cycle: "Requests answered 500 because rewrites with `last` restarted more than 10 times",
    acme_challenge_tls: "TLS-ALPN-01 challenge handshakes answered (ALPN acme-tls/1)",
    client_body_timeout: "Client connections closed because the request body came too slowly (body_timeout, body_min_rate)",
    client_send_timeout: "Client connections closed because a response write made no progress for send_timeout",
    client_send_total_timeout: "HTTP/1.1 client connections closed because a response took longer than send_total_timeout to send",
    client_conn_refused: "Client connections refused (503, closed) because max_connections were open",
    client_refused: "Requests refused before the request pipeline (strict parser, body framing, max_connections); each is an access-log record with reason refused:<word>",
    client_linger_skipped: "Connections refused at max_connections closed without a lingering close because MAX_LINGERING were already lingering",
    client_interim: "1xx informational responses from backends (103 Early Hints, 102 Processing) forwarded to clients ahead of the final response",
    client_interim_dropped: "1xx informational responses from backends not forwarded: the client spoke HTTP/1.0, more than 8 came for one request, they could not go out before the final response in order (pipelined requests), or the HTTP/2 stream was reset",
    client_tunnel: "Connections switched to a tunnel after the backend answered an Upgrade request with 101",
    client_tunnel_idle_closed: "Tunnels closed after tunnel_idle_timeout without a byte either way",
    client_accept_error: "Failed accept() calls (e.g. out of file descriptors); the listener backs off 50 ms",
    client_proxy: "PROXY protocol headers accepted on server.proxy_protocol listeners (the client address they name replaces the peer's)",
    client_proxy_untrusted: "Connections to a server.proxy_protocol listener closed because the peer is not in server.proxy_protocol_from",
    client_proxy_missing: "Connections to a server.proxy_protocol listener closed because they did not start with a PROXY protocol header (or closed before sending one)",
    client_proxy_malformed: "Connections to a server.proxy_protocol listener closed because their PROXY protocol header was malformed",
    client_proxy_timeout: "Connections to a server.proxy_protocol listener closed because no complete PROXY protocol header came within header_read_timeout",
    h2_conn: "HTTP/2 client connections served (h2c with prior knowledge on cleartext listeners, ALPN h2 on TLS ones)",
    h2_req: "Requests received over HTTP/2 (also counted in client_req)",
    h2_rst_received: "RST_STREAM frames received from HTTP/2 clients (streams they cancelled)",
    h2_rst_sent: "RST_STREAM frames sent to HTTP/2 clients (refused, malformed or failed streams)",
    h2_goaway_sent: "GOAWAY frames sent with NO_ERROR (graceful close: shutdown, idle_timeout, http2.max_requests)",
    h2_goaway_error: "GOAWAY frames sent with an error code (protocol errors, the flood defences)",
    h2_rapid_reset: "HTTP/2 connections ended (GOAWAY ENHANCE_YOUR_CALM) for resetting more streams than http2.reset_budget beyond their completed responses (rapid reset, CVE-2023-44487)",
    h2_made_you_reset: "HTTP/2 connections ended (GOAWAY ENHANCE_YOUR_CALM) for making Shellac reset more streams than http2.reset_budget with protocol errors (MadeYouReset, CVE-2025-8671)",
    h2_control_flood: "HTTP/2 connections ended (GOAWAY ENHANCE_YOUR_CALM) for sending more than http2.control_frames_per_second PING, SETTINGS, PRIORITY or unknown frames",
    h2_continuation_flood: "HTTP/2 connections ended (GOAWAY ENHANCE_YOUR_CALM) for a header block of more CONTINUATION frames than server.max_header_size needs (at least 4) or of more than twice server.max_header_size bytes",
    h2_hpack_bomb: "HTTP/2 connections ended (GOAWAY ENHANCE_YOUR_CALM) for a header block decoding to more than four times server.max_header_size (HPACK bomb)",
    h2_data_flood: "HTTP/2 connections ended (GOAWAY ENHANCE_YOUR_CALM) for floods of empty or tiny DATA frames (h2's budget: 100 empty frames, small frames' overhead at most half the connection window)",
    h2_slow_reader: "HTTP/2 connections closed because a response waited send_timeout for the client (no window granted, nothing read) while no DATA frame could be sent",
    h2_max_requests: "HTTP/2 connections asked to close (GOAWAY NO_ERROR) after http2.max_requests streams",
    client_reject_request_line: "Requests refused before parsing: bad method, target or version, URI too long, CONNECT (400/414/505/405)",
    client_reject_header: "Requests refused before parsing: malformed field lines (obs-fold, space before colon, bare CR/LF, control bytes)",
    client_reject_host: "Requests refused before parsing: missing, duplicate or invalid Host",
    client_reject_framing: "Requests refused before parsing: ambiguous or invalid Content-Length / Transfer-Encoding (400/501)",
    client_reject_hop_by_hop: "Requests refused before parsing: Connection naming an end-to-end field, or malformed",
    client_reject_chunked: "Requests refused for malformed chunked bodies (size, extension, data, trailer)",
    client_reject_limit: "Requests refused by a size limit: request line (414), head or fields (431), body (413)",
    client_field_underscore: "Request fields dropped because their name contains `_` (server.underscores_in_headers = false): stacks that map `_` to `-` would read X_Forwarded_Host as X-Forwarded-Host",
    cache_hit: "Requests answered from a fresh cached object",
    cache_hit_memory: "Cache hits answered by the memory tier",
    cache_hit_disk: "Cache hits answered by the disk tier (small objects are then promoted to memory)",
    cache_hit_shared: "Cache hits answered by the shared tier (storage.shared; the object is then stored in the local tiers)",
    cache_hit_fast: "Cache hits answered on the fast path: from the request head's bytes and the object's pre-serialised response head, without hyper (server.fast_hits)",
    cache_miss: "Requests that fetched from a backend to fill the cache",
    cache_hitmiss: "Requests that skipped coalescing because the URL was recently uncacheable (hit-for-miss)",
    cache_hitpass: "Requests passed because the URL is hit-for-pass (VCL `return (pass(DURATION))`)",
    cache_coalesced: "Requests that waited on another request's fetch instead of going to the backend",
    cache_busy_wait: "Requests that started waiting on another request's fetch of their object (Varnish's busy_sleep; cache_coalesced counts those then served from it)",
    cache_vary_miss: "Requests that found another Vary variant being fetched and fetched their own",
    compress_gzip: "Fetched identity bodies gzipped once to be stored compressed ([compression], beresp.do_gzip)",
    compress_gzip_bytes_in: "Identity bytes gzipped at fetch (with compress_gzip_bytes_out: the ratio achieved)",
    compress_gzip_bytes_out: "gzip bytes those made",
    compress_gzip_checked: "Fetched gzip bodies from origins checked as they streamed through (stored as they came)",
    compress_gzip_invalid: "Fetched or delivered gzip bodies found malformed (bad header, corrupt data, wrong CRC or length, truncated): the body is cut, never stored or served as if whole",
    compress_gunzip: "Responses whose gzip body was decoded for a client that does not take gzip (compression.enabled, beresp.do_gunzip)",
    compress_br: "br representations of stored objects built in the background ([compression] encodings)",
    compress_zstd: "zstd representations of stored objects built in the background ([compression] encodings)",
    compress_encoded_bytes_in: "Identity bytes of the objects those were built from",
    compress_encoded_bytes_out: "br and zstd bytes built (with compress_encoded_bytes_in: the ratio achieved)",
    compress_encoded_served: "Responses served from a br, zstd or identity representation built in the background",
    compress_identity: "Identity representations of hot stored gzip objects built in the background for clients without gzip (their hits are then not decoded per hit)",
    compress_decode: "br or zstd bodies an origin sent decoded for a client (or an ESI include) that does not take them",
    compress_decode_checked: "Fetched br or zstd bodies from origins checked as they streamed through to be stored (stored as they came)",
    compress_decode_invalid: "br or zstd bodies found malformed or truncated while decoded or checked (the response was cut, the body never stored)",
    compress_encoded_read_back: "br or zstd representations read back from the disk tier (after a restart, or once memory evicted them) to be served",
    compress_encode_dropped: "Representations not built: the queue was full ([compression] queue), the object could not be read or decoded, or the result was not smaller than the gzip",
    cache_pass: "Requests passed to the backend without cache lookup (method, request no-store, a rule's pass, upgrade)",
    cache_uncacheable: "Backend responses not stored (no-store, private, Set-Cookie, no freshness, ...)",
    cache_insert: "Objects inserted into the cache",
    cache_partial_hit: "Range requests answered from stored partial content (206 pieces), with 206 or 416",
    cache_partial_stored: "206 responses stored as pieces of partial content (combined with the pieces held if they share a strong validator)",
    cache_partial_completed: "Representations whose stored pieces came to cover them whole and became one stored object",
    slice_learnt: "URLs learnt to be cached in slices (cache.slice): a response longer than max_object_size with a strong validator",
    slice_responses: "Client responses answered from slices of a big object",
    slice_hit: "Slices of big objects read from the cache (memory or disk tier)",
    slice_miss: "Slices of big objects the cache did not hold: fetched, or followed while another request fetched them",
    slice_fetch: "Slice requests sent to an origin (Range: bytes=a-b)",
    slice_validator_mismatch: "Slices whose validator or length differed from the representation's: every slice of the URL invalidated",
    slice_range_ignored: "Slice requests an origin answered with 200 (Range ignored): passed through uncached, the URL not sliced for hit_for_miss_ttl",
    slice_head_fetch: "HEAD requests on a sliced URL whose first slice was not stored, answered from one byte asked of the origin (Range: bytes=a-a; nothing stored, no slice read)",
    slice_seek: "FLV and MP4 seeks (?start=, an flv or mp4 rule) answered from the slices of a big object",
    slice_seek_slices: "Slices those seeks read: an MP4's moov slices before the head (each counted once per seek) and the slices of the data sent",
    cache_deception_armor: "Backend responses a rule's ttl / min_ttl / override_origin did not apply to because their Content-Type did not fit the URL's extension (cache deception armor)",
    cache_expired: "Stale objects found on lookup and fetched again",
    esi_parsed: "Fetched bodies parsed for ESI (a policy turned ESI on: VCL beresp.do_esi, a rule's esi = true)",
    esi_programs: "Parsed bodies that held ESI and were stored with their program (a hit never parses again)",
    esi_errors: "Malformed ESI found while parsing (the tag dropped or passed through, as Varnish does; logged)",
    esi_warnings: "ESI accepted but not as written (e.g. an include without its final /), logged",
    esi_not_xml: "Bodies ESI was on for that were not parsed: not starting with '<' (esi.disable_xml_check off)",
    esi_surrogate: "Backend responses ESI was turned on for by their Surrogate-Control: content=\"ESI/1.0\" (esi.surrogate_control)",
    esi_pages: "Pages delivered assembled from their ESI program (client pages and nested fragments)",
    esi_includes: "Includes requested as sub-requests through Shellac",
    esi_include_failed: "Includes that failed (transport error, 5xx, timeout, refused or limited) and fell back to alt, onerror or the page's failure",
    esi_include_alt: "Includes answered by their alt= URL after src failed",
    esi_include_dropped: "Failed includes left out of the page (onerror=\"continue\", or after the first byte with esi.late_failure = \"drop\")",
    esi_include_refused: "Includes whose absolute src named a host that is neither the page's, a backend's nor in esi.hosts (never fetched: no SSRF)",
    esi_depth_limited: "Includes not fetched because the page was at esi.max_depth (ends include loops)",
    esi_include_limited: "Includes not fetched because the client page had reached esi.max_includes",
    esi_page_failed: "Pages answered 503 because an include without onerror=\"continue\" failed before the first byte",
    esi_program_damaged: "Stored ESI programs that could not be read back (the object delivered as stored)",
    n_lru_nuked: "Objects evicted to make room (size limit)",
    disk_admit: "Objects written to the disk tier",
    disk_admit_skip: "Objects not written to disk because they were seen for the first time (admission = second-request)",
    disk_transient: "Objects kept in memory only, never written to the disk tier: transient (VCL's storage.Transient, or a lifetime below cache.shortlived)",
    disk_reject: "Objects refused by the disk tier (writer queue full, too large, suspended after an I/O error, write failed)",
    disk_bytes_admitted: "Bytes of objects (key, metadata, body) written to the disk tier",
    disk_bytes_written: "Bytes written to the disk data file (entries, padding, region headers, summaries); divided by disk_bytes_admitted: write amplification",
    disk_regions_reclaimed: "Disk regions reclaimed whole to make room (their objects dropped from the index)",
    disk_checksum_fail: "Disk entries that failed their checksum and were dropped (never served; fetched again)",
    disk_incomplete_tail: "Entries at the end of a disk region that was being written when the process died (kill -9, crash), found incomplete at start-up and dropped (not corruption)",
    disk_io_error: "Disk tier read or write errors (writes: admission suspended for 10 s, serving continues)",
    disk_recovered_objects: "Objects indexed from the disk tier at start-up",
    disk_recovery_ms: "Milliseconds spent rebuilding the disk index at start-up",
    disk_recovery_scanned_regions: "Disk regions read entry by entry at start-up because they had no summary (the previous process did not stop cleanly); 0 after a clean stop or `shellac upgrade`",
    disk_recovered_variants: "Vary variants whose URL's variant list was rebuilt from the disk tier at start-up",
    disk_recovered_tagged: "Objects on disk whose surrogate keys were put back into the tag index at start-up",
    disk_reset: "Times the disk tier started empty because its file had another format version or layout, or no intact ban list (never misread)",
    shared_hit: "Objects read from the shared tier (storage.shared): complete, every chunk there and checked",
    shared_miss: "Shared tier lookups that found nothing (the origin was asked)",
    shared_refused: "Shared tier records not used: another URL's (hash collision), unreadable, or a chunk missing (a newer write or a purge removed it): a miss, never a partial body",
    shared_write: "Objects written to the shared tier (chunks, then the metadata committed)",
    shared_write_skip: "Objects not written to the shared tier: larger than storage.shared.max_object_size, their body on disk, or transient (VCL's storage.Transient, cache.shortlived)",
    shared_write_dropped: "Shared tier writes dropped because the write queue was full",
    shared_write_purged: "Shared tier writes refused because the URL was purged after the fetch started (a fill that raced a purge)",
    shared_write_incomplete: "Shared tier writes refused because a chunk was gone before the commit",
    shared_error: "Shared tier operations that failed (connection, cluster, server errors)",
    shared_connect_error: "Attempts to connect to the Redis Cluster that failed (unreachable, refused, TLS handshake, authentication), each logged; the node serves without the shared tier and tries again every storage.shared.breaker_cooldown",
    shared_auth_error: "Refusals of the shared tier's credentials or permissions by the Redis Cluster (WRONGPASS, NOAUTH, NOPERM): a configuration error, logged at ERROR naming the setting to fix (repeats at most every 10 minutes) and shown by GET /fleet, shellac stat and the dashboard",
    shared_timeout: "Shared tier operations that missed their deadline (storage.shared.read_timeout / write_timeout)",
    shared_skipped: "Shared tier operations skipped because the circuit breaker was open",
    shared_breaker_open: "Times the shared tier's circuit breaker opened (breaker_threshold failures in a row, or a failed probe)",
    shared_lease: "Fleet leases taken: this node fetches a URL from the origin for the whole fleet",
    shared_lease_wait: "Misses that waited for another node's fetch (the fleet lease was held)",
    shared_lease_waited_hit: "Misses that waited for another node's fetch and then found its copy in the shared tier",
    shared_lease_timeout: "Misses that stopped waiting for another node's fetch after storage.shared.lease_timeout and went to the origin",
    fleet_inval_sent: "Invalidations (PURGE, soft purge, ban, tag purge) received here and sent to the fleet's log",
    fleet_inval_queued: "Invalidations queued because Redis could not be reached (sent when it can)",
    fleet_inval_dropped: "Invalidations not queued for the fleet because the queue was full (10,000)",
    fleet_inval_applied: "Invalidations from other nodes applied here",
    fleet_inval_unconfirmed: "Invalidations answered before every live node confirmed them (storage.shared.confirm_timeout)",
    fleet_reset: "Times this node dropped its local cache because it could not know what the fleet invalidated (too far behind the log, log lost, joined without a saved position)",
    backend_req: "Requests sent to backends",
    backend_conn: "Backend connections opened",
    backend_h2_conn: "HTTP/2 connections opened to backends with protocol = \"h2\" (also counted in backend_conn)",
    backend_reuse: "Backend requests sent on a reused keep-alive connection",
    backend_retry: "Requests retried: on a fresh connection after a reused one failed, or on another backend after a connection failure (only counted when another backend is tried)",
    backend_fail: "Backend connection failures (refused, unreachable, connect timeout)",
    backend_timeout: "Backend first-byte timeouts (answered 504)",
    backend_body_timeout: "Backend between-bytes timeouts while streaming a body",
    backend_error: "Backend responses that failed for other reasons (reset, bad response)",
    fetch_failed: "Backend fetches that ended without a usable response head (no healthy backend, connection refused or timed out, busy, first-byte timeout, invalid or cut-short head, after every backend the route allows was tried; under VCL each such fetch, and each retry of it, runs vcl_backend_error), or whose body failed as it was read (cut short, malformed, between-bytes timeout). Varnish's fetch_failed",
    backend_invalid: "Backend responses refused (502, connection closed) for bad framing or status (Transfer-Encoding other than chunked, with Content-Length, invalid Content-Length, status outside 200-599)",
    synth_resp: "Responses generated by Shellac itself (errors)",
    s_resp_bytes: "Response body bytes sent to clients",
    s_req_bytes: "Request body bytes forwarded to backends",
    vsthrottle_denied: "VCL vsthrottle.is_denied() calls that denied (the key's bucket was empty, or blocked)",
    rate_limited: "Requests answered 429 by a [[rule]]'s rate_limit (the key's bucket was empty, or blocked)",
    rate_limit_evicted: "Rate-limit buckets (vsthrottle and [[rule]] rate_limit) evicted from a full table (server.rate_limit_keys) while still counting: their key starts afresh",
    vcl_match_limit: "VCL regular-expression matches that ran past [vcl] match_limit backtracking steps (Varnish's pcre2_match_limit) and failed",
    req_body_cached: "Request bodies VCL's std.cache_req_body() kept in memory for every backend request of their request (restarts, retries); each at most the size the call names",
    req_body_cached_bytes: "Bytes of the request bodies std.cache_req_body() kept",
    backend_recycle: "Backend connections returned to the pool after a complete response",
    backend_drained: "Backend responses the fetch did not use (VCL restart, retry, abandon or error on the response head; a director's restart_on) whose body, at most 64 KiB, was read to its end within 100 ms so their keep-alive connection went back to the pool (also counted in backend_recycle)",
    backend_drain_closed: "Backend responses the fetch did not use whose body was longer than 64 KiB, or slower than 100 ms, to read to its end: their connection was closed",
    backend_busy: "Backend requests refused because max_connections and its queue were full",
    backend_wait: "Backend requests that waited in a backend's max_queue for a connection slot (max_connections reached)",
    backend_wait_fail: "Backend requests whose wait for a connection slot ran past wait_timeout (also counted in backend_busy)",
    backend_restart: "Requests re-run on the director's next choice because of the response status",
    hotlink_refused: "Requests a [[rule]]'s valid_referers (403) or secure_link (403, 410: expired) refused",
    flv_seek: "Requests with ?start= under a [[rule]] flv = true: answered with the FLV header and the file from that byte",
    sendfile_bytes: "Body bytes of static files sent with sendfile(2) (parts of 32 KiB or more of a files backend's answer passed unchanged to a cleartext HTTP/1.1 client)",
    splice_bytes: "Body bytes of stored objects sent without a copy (vmsplice(2) and splice(2) of the pages of a body of 64 KiB or more kept in memory, to a cleartext HTTP/1.1 client)",
    splice_fallback: "Writes of stored bodies that could have gone out without a copy but were copied because no pipe was free (n_splice_pipe at its limit) or the kernel refused one or shrank it (a user past fs.pipe-user-pages-soft; then for a second no new pipe is asked for)",
    mp4_seek: "Requests with ?start= under a [[rule]] mp4 = true (answered with the file cut at the keyframe at or before that time when it can be)",
    mp4_seek_whole: "MP4 seeks answered with the whole file because it could not be cut (over mp4_max_moov_size, damaged, fragmented, a moov after the mdat ending past mp4_max_moov_size, or server.mp4_moov_memory reached; logged)",
    mp4_seek_memory: "MP4 seeks answered with the whole file because holding their moov would pass server.mp4_moov_memory (also counted in mp4_seek_whole)",
    files_script_refused: "Requests a files backend answered 404 because the path names a PHP script (a segment ending in .php, .phtml, .phar, .phps, .pht or .php3 to .php8, any case) or its index or try_files entry found is one, or a symbolic link with another name leads to one, so as not to send the script's source (send_scripts = false, the default)",
    files_refused_method: "Requests a files backend refused because their method is not GET or HEAD (405)",
    files_refused_traversal: "Requests a files backend refused because their path holds a .. segment, written or escaped (%2e%2e) (400)",
    files_refused_encoding: "Requests a files backend refused because their path holds a malformed escape or bytes that are not UTF-8, overlong forms such as %c0%ae included (400)",
    files_refused_control: "Requests a files backend refused because their path holds NUL, another control byte or a backslash, written or escaped (400)",
    files_refused_escaped_slash: "Requests a files backend answered 404 because a segment of their path holds an escaped slash (%2f)",
    files_refused_dotfile: "Requests a files backend answered 404 because their path names a dotfile or dot-directory other than .well-known (dotfiles = false, the default)",
    files_refused_symlink: "Requests a files backend answered 404 because the file or directory opened is really outside the root: a symbolic link leading out (follow_symlinks = false, the default)",
    files_refused_special: "Requests a files backend answered 404 because the path names a FIFO, a device or a socket (only regular files and directories are served)",
    files_refused_unreadable: "Requests a files backend answered 403 because the file or directory (or one on its way) is not readable by this process",
    files_refused_no_index: "Requests a files backend answered 403 because they name a directory without an index file (autoindex = false, the default)",
    files_refused_script_copy: "Requests a files backend answered 404 because the path, or the file it really opens through a symbolic link, names a copy of a PHP script: a PHP extension followed by a backup, editor, package or compression mark (x.php~, #x.php#, x.php.bak, .x.php.swp, x.php.save.1, x.php.gz, x.php.tar.gz; send_scripts = false, the default)",
    files_refused_script_source: "Requests a files backend answered 404 because the file, named like an ordinary one, starts with PHP source (<?php or <?= after an optional byte-order mark, #! line and whitespace): a script's copy under an invented name such as wp-config.backup (send_scripts = false and sniff_scripts = true, the defaults; read once per open, kept by the open-file cache)",
    fastcgi_refused_traversal: "Requests a FastCGI backend refused before the application saw them because their path holds a .. segment, written or escaped (%2e%2e) (400)",
    fastcgi_refused_encoding: "Requests a FastCGI backend refused before the application saw them because their path holds a malformed escape or bytes that are not UTF-8 (400)",
    fastcgi_refused_control: "Requests a FastCGI backend refused before the application saw them because their path holds NUL, another control byte or a backslash (400)",
    fastcgi_refused_escaped_slash: "Requests a FastCGI backend answered 404 before the application saw them because a segment of their path holds an escaped slash (%2f)",
    fastcgi_refused_dotfile: "Requests a FastCGI backend answered 404 before the application saw them because their path names a dotfile or dot-directory other than .well-known",
    fastcgi_refused_missing: "Requests a FastCGI backend answered 404 before the application saw them because their path names a .php script that is not a regular file inside the root (missing, a directory, a link out, unreadable)",
    fastcgi_refused_pathinfo: "Requests a FastCGI backend answered 404 before the application saw them because their .php script lies under a regular file (/uploads/evil.jpg/x.php: the cgi.fix_pathinfo hole, which would run evil.jpg)",
    files_try_next: "Requests a files backend handed on to another backend because none of its try_files existed (try_files = [..., \"@NAME\"])",
    backend_unhealthy: "Requests for which no healthy backend was available",
    backend_probe: "Health probes sent",
    backend_probe_fail: "Health probes that failed",
    cache_grace_hit: "Stale objects delivered within grace while a background fetch refreshes them",
    cache_refresh: "Background fetches started to refresh an object delivered within grace",
    cache_refresh_ahead: "Background fetches started to refresh a fresh object requested within cache.refresh_ahead of its expiry",
    cache_revalidated: "Stale objects refreshed by a 304 from the backend (conditional revalidation)",
    cache_revalidated_gone: "304s to the revalidation of a copy purged or banned meanwhile: the copy is not refreshed (4.x VCL: the fetch fails into vcl_backend_error; else it is repeated unconditionally)",
    cache_invalidated: "Objects removed after a successful unsafe request (any method but GET, HEAD, OPTIONS, TRACE)",
    purge_req: "PURGE requests accepted",
    purge_denied: "PURGE requests refused (client not in invalidation.purge_from)",
    purge_objects: "Objects removed or marked stale by PURGE (URL, soft or tag)",
    ban_added: "Bans added",
    ban_objects: "Objects removed because a ban matched (at lookup or by the sweeper)",
    ban_retired: "Bans retired after every object was checked against them (or, on disk, nothing older than them could still be served)",
    ban_recovered: "Bans read back from the disk tier at start-up",
    ban_recovered_folded: "Persisted bans not reloaded (over invalidation.max_bans, or invalid): every disk object older than them was dropped instead",
    ban_persist_full: "Bans refused because the ban list kept by the disk tier (1 MiB) was full",
    cache_stale_served: "Stale objects served (within grace) because no backend could answer",
    log_dropped: "Transaction records dropped because a worker's log buffer was full (writer behind)",
    log_write_error: "Access log writes or flushes that failed (disk full, closed pipe, ...)",
    ;
    /// Responses that were not a plain hit or miss, by reason ([`PASS_REASONS`]).
    pass_reason: PassReasons,
    /// Time from request arrival to response head ([`TTFB_DESCRIPTION`]).
    ttfb: Histogram,
    }
}

counters! {
    /// Per-backend counters (the same events as the `backend_*` totals), for `/backends`.
    struct BackendCounters {
    req: "Requests sent to this backend",
    conn: "Connections opened",
    reuse: "Requests sent on a reused connection",
    recycle: "Connections returned to the pool",
    fail: "Connection failures (refused, unreachable, connect timeout)",
    busy: "Requests refused by max_connections",
    error: "Failed exchanges (reset, bad response, timeouts)",
    ;
    /// Time from sending a request on a connection to this backend's response head.
    ttfb: Histogram,
    }
}

/// Every name `/stats` reports, in its order: counters, pass reasons, gauges.
pub fn names() -> Vec<&'static str> {
    Counters::DESCRIPTIONS
        .iter()
        .map(|(n, _)| *n)
        .chain(PASS_REASONS.iter().map(|(_, n, _)| *n))
        .chain(GAUGES.iter().map(|(n, _)| *n))
        .collect()
}

/// Description of any name in [`names`].
pub fn description(name: &str) -> &'static str {
    Counters::DESCRIPTIONS
        .iter()
        .copied()
        .chain(PASS_REASONS.iter().map(|(_, n, d)| (*n, *d)))
        .chain(GAUGES.iter().copied())
        .find(|(n, _)| *n == name)
        .map_or("", |(_, d)| d)
}

/// Whether `name` is a gauge (a level) rather than a counter (a total).
pub fn is_gauge(name: &str) -> bool {
    GAUGES.iter().any(|(n, _)| *n == name)
}

/// Gauges are computed at scrape time from the component that owns them; declared here so the
/// list of names and descriptions stays in one place.
pub const GAUGES: &[(&str, &str)] = &[
    ("n_object", "Objects currently in the memory cache"),
    ("n_hit_for_miss", "URLs currently remembered as uncacheable"),
    (
        "n_busy",
        "Fetches in progress that other requests may wait on",
    ),
    (
        "cache_bytes",
        "Bytes accounted to cached objects (headers, bodies, overhead)",
    ),
    ("cache_capacity_bytes", "Configured memory cache size"),
    (
        "cache_slab_bytes",
        "Bytes of the memory tier's slabs in use (entries, their free slots, one spare slab per size)",
    ),
    (
        "cache_slot_bytes",
        "Bytes of the memory tier's slabs in entries now",
    ),
    (
        "n_object_disk",
        "Objects currently indexed in the disk tier",
    ),
    (
        "disk_bytes",
        "Bytes of the disk tier held by live objects (entries as written)",
    ),
    (
        "disk_capacity_bytes",
        "Size of the disk data file's regions (0 without a disk tier)",
    ),
    ("n_client_conn", "Client connections open now"),
    (
        "n_client_conn_released",
        "Client connections open now that are idle and released (no HTTP buffers held)",
    ),
    (
        "n_client_conn_waiting",
        "New client connections open now that have not sent a byte yet (a socket alone until they do or header_read_timeout passes)",
    ),
    (
        "n_splice_pipe",
        "Pipes lent to client connections now to send stored bodies without a copy (at most 256)",
    ),
    (
        "mp4_moov_bytes",
        "Bytes MP4 seeks hold now to read moovs: first bytes up to a moov, a moov after the mdat, the slices a sliced file's seek reads (at most server.mp4_moov_memory)",
    ),
    (
        "shared_breaker_state",
        "The shared tier's circuit breaker: 0 closed, 1 open, 2 half-open (0 without storage.shared)",
    ),
    (
        "fleet_inval_lag_ms",
        "How far this node's position in the fleet's invalidation log is behind its newest entry, in ms of log time",
    ),
    (
        "fleet_sync_age_ms",
        "Milliseconds since this node last read the fleet's invalidation log completely",
    ),
    (
        "fleet_inval_outbox",
        "Invalidations waiting to be sent to the fleet (Redis unreachable)",
    ),
    ("uptime_seconds", "Seconds since start"),
    (
        "log_subscribers",
        "Readers of the live transaction stream (shellac log) now",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_matches_descriptions() {
        let c = Counters::default();
        c.client_req.inc();
        c.s_resp_bytes.add(10);
        let snap = c.snapshot();
        assert_eq!(snap.len(), Counters::DESCRIPTIONS.len());
        assert!(snap.contains(&("client_req", 1)));
        assert!(snap.contains(&("s_resp_bytes", 10)));
    }

    #[test]
    fn histogram_and_quantiles() {
        let h = Histogram::default();
        assert_eq!(quantile_us(&h.buckets(), 0.5), None);
        for _ in 0..90 {
            h.observe(std::time::Duration::from_micros(80)); // bucket ≤100
        }
        for _ in 0..10 {
            h.observe(std::time::Duration::from_millis(20)); // bucket ≤25000
        }
        h.observe(std::time::Duration::from_secs(60)); // +Inf
        let b = h.buckets();
        assert_eq!(b[0], 90);
        assert_eq!(b[LATENCY_BOUNDS_US.partition_point(|x| *x < 20_000)], 10);
        assert_eq!(b[LATENCY_BUCKETS - 1], 1);
        assert_eq!(h.sum_us(), 90 * 80 + 10 * 20_000 + 60_000_000);
        let p50 = quantile_us(&b, 0.5).unwrap();
        assert!(p50 <= 100, "{p50}");
        let p95 = quantile_us(&b, 0.95).unwrap();
        assert!((10_000..=25_000).contains(&p95), "{p95}");
        assert_eq!(quantile_us(&b, 1.0), Some(10_000_000));
    }
}
