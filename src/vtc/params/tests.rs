//! The Varnish parameters the runner maps to Shellac settings, accepts without meaning,
//! or refuses (skipping the file), and the configuration file it writes from them.

use super::*;

/// Object lifetimes and the whole-delivery send limit.
#[test]
fn ttl_grace_keep_and_send_timeout() {
    let mut s = Settings::default();
    assert_eq!(s.set("default_ttl", "10"), Ok(()));
    assert_eq!(s.set("default_grace", "0.5"), Ok(()));
    assert!(matches!(
        s.set("default_keep", "x"),
        Err(ParamError::Invalid(_))
    ));
    // A knob of Varnish's own machinery: accepted, no meaning here.
    assert_eq!(s.set("thread_pools", "1"), Ok(()));
    // Varnish's whole-delivery send limit: server.send_total_timeout.
    assert_eq!(s.set("send_timeout", "1"), Ok(()));
    assert_eq!(
        s.values
            .get(&("server", "send_total_timeout"))
            .map(String::as_str),
        Some("\"1000ms\"")
    );
}

/// Head and field-line limits in bytes.
#[test]
fn head_limits() {
    let mut s = Settings::default();
    // Head and field-line limits in bytes, at least Shellac's minimums (trunk c00039's
    // 256-byte head is below them: the file is skipped, saying so).
    assert_eq!(s.set("http_req_hdr_len", "40"), Ok(()));
    assert!(matches!(
        s.set("http_req_hdr_len", "39"),
        Err(ParamError::Unmapped(_))
    ));
    assert_eq!(s.set("http_resp_hdr_len", "8k"), Ok(()));
    assert_eq!(s.set("http_req_size", "4k"), Ok(()));
    assert_eq!(
        s.values
            .get(&("server", "max_request_line"))
            .map(String::as_str),
        Some("4096")
    );
    match s.set("http_req_size", "256") {
        Err(ParamError::Unmapped(m)) => assert!(m.contains("max_header_size"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.set("http_resp_hdr_len", "x"),
        Err(ParamError::Invalid(_))
    ));
}

/// The tunnel, backend-pool, read-ahead and restart parameters.
#[test]
fn tunnel_backend_and_restart_timeouts() {
    let mut s = Settings::default();
    // A tunnel's idle timeout and the VCL backends' pool: settings of their own.
    assert_eq!(s.set("pipe_timeout", "0.5"), Ok(()));
    assert_eq!(
        s.values
            .get(&("server", "tunnel_idle_timeout"))
            .map(String::as_str),
        Some("\"500ms\"")
    );
    assert_eq!(s.set("backend_idle_timeout", "120"), Ok(()));
    assert_eq!(
        s.values
            .get(&("vcl", "backend_idle_timeout"))
            .map(String::as_str),
        Some("\"120000ms\"")
    );
    // Shellac streams passes at the client's pace: any read-ahead bound but none.
    assert_eq!(s.set("transit_buffer", "1k"), Ok(()));
    assert!(matches!(
        s.set("transit_buffer", "0"),
        Err(ParamError::Unmapped(_))
    ));
    assert!(matches!(
        s.set("transit_buffer", "x"),
        Err(ParamError::Invalid(_))
    ));
    assert!(matches!(
        s.set("backend_remote_error_holddown", "1"),
        Err(ParamError::Unmapped(_))
    ));
    // Backend timeouts and restarts: `[vcl]`'s defaults for the file's backends.
    assert_eq!(s.set("connect_timeout", "1.5"), Ok(()));
    assert_eq!(s.set("max_restarts", "2"), Ok(()));
    assert_eq!(s.set("shortlived", "0"), Ok(()));
    assert_eq!(s.set("idle_send_timeout", "never"), Ok(()));
    assert_eq!(s.set("timeout_linger", "0.5"), Ok(()));
    assert_eq!(
        s.values
            .get(&("server", "idle_release"))
            .map(String::as_str),
        Some("\"500ms\"")
    );
    assert_eq!(
        s.values
            .get(&("vcl", "connect_timeout"))
            .map(String::as_str),
        Some("\"1500ms\"")
    );
    assert_eq!(
        s.values.get(&("vcl", "max_restarts")).map(String::as_str),
        Some("2")
    );
}

/// `debug`, `feature`, `vsl_mask`, `vcc_feature` and the ESI bits.
#[test]
fn debug_feature_and_esi_bits() {
    let mut s = Settings::default();
    assert_eq!(s.set("debug", "+syncvsl,+waitinglist"), Ok(()));
    assert!(s.set("debug", "+slow_acceptor").is_err());
    assert_eq!(s.set("feature", "+http2"), Ok(()));
    assert_eq!(s.set("http_range_support", "on"), Ok(()));
    assert!(s.set("http_range_support", "off").is_err());
    assert_eq!(s.set("vsl_mask", "-VCL_trace"), Ok(()));
    assert_eq!(s.set("vcc_feature", "-err_unref"), Ok(()));
    // ESI: features that are settings, that Shellac always has, the 2.x bitmap.
    assert_eq!(s.set("feature", "+esi_disable_xml_check"), Ok(()));
    assert_eq!(s.set("feature", "+esi_include_onerror"), Ok(()));
    assert!(s.set("feature", "-esi_ignore_https").is_err());
    assert_eq!(s.set("debug", "+esi_chop"), Ok(()));
    assert_eq!(s.set("esi_syntax", "6"), Ok(()));
    assert!(s.set("esi_syntax", "0x10").is_err());
}

/// `-s malloc,SIZE`: the memory tier's size, at least Shellac's floor.
#[test]
fn storage() {
    let mut s = Settings::default();
    // Below Shellac's 64 KiB floor: the floor (varnishtest 2.1.5 c00027's `malloc,40k`).
    assert_eq!(s.storage("malloc,40k"), Ok(()));
    assert_eq!(
        s.values.get(&("cache", "memory_size")).map(String::as_str),
        Some("65536")
    );
    // `s0` named as such is the memory tier too.
    assert_eq!(s.storage("s0=malloc,1M"), Ok(()));
    assert_eq!(
        s.values.get(&("cache", "memory_size")).map(String::as_str),
        Some("1048576")
    );
    assert!(matches!(
        s.storage("debug,lessspace"),
        Err(ParamError::Unmapped(_))
    ));
    assert!(matches!(
        s.storage("file,/tmp/x,10m,64k"),
        Err(ParamError::Unmapped(_))
    ));
}

/// `-s NAME=TYPE,SIZE`: named storages, the unnamed ones named s0, s1, ... as varnishd names
/// them; the memory tier grows by their sizes.
#[test]
fn named_storages() {
    let mut s = Settings::default();
    assert_eq!(s.storage("default,1m"), Ok(()));
    assert_eq!(s.storage("default,1m"), Ok(()));
    assert_eq!(s.storage("Transient=malloc"), Ok(()));
    assert_eq!(s.storage("dir=file,/tmp/,2m"), Ok(()));
    assert!(matches!(
        s.storage("dir=malloc,1m"),
        Err(ParamError::Invalid(_))
    ));
    let t = s.toml(None, None, None, Path::new("/t"));
    assert!(t.contains("memory_size = 4194304"), "{t}");
    assert!(t.contains("max_object_size = 1048576"), "{t}");
    assert!(
        t.contains("[[storage.named]]\nname = \"s1\"\nsize = 1048576\n\n[[storage.named]]\nname = \"Transient\"\n\n[[storage.named]]\nname = \"dir\"\nsize = 2097152\n"),
        "{t}"
    );
    // The file parses as a configuration.
    let config = crate::config::Config::parse(
        &format!("{t}\n[[backend]]\nhost = \"127.0.0.1\"\n"),
        "t.toml",
    );
    assert!(config.is_ok(), "{config:?}");
}

/// The configuration written from the parameters set.
#[test]
fn configuration_file() {
    let mut s = Settings::default();
    assert_eq!(s.set("default_ttl", "10"), Ok(()));
    assert_eq!(s.set("default_grace", "0.5"), Ok(()));
    assert_eq!(s.set("connect_timeout", "1.5"), Ok(()));
    assert_eq!(s.set("feature", "+http2"), Ok(()));
    assert_eq!(s.set("esi_syntax", "6"), Ok(()));
    assert_eq!(s.set("vcc_feature", "-err_unref"), Ok(()));
    assert_eq!(s.set("max_restarts", "2"), Ok(()));
    assert_eq!(s.storage("malloc,1M"), Ok(()));
    let t = s.toml(
        Some(&["127.0.0.1:0".to_string(), "/t/v1.sock".to_string()]),
        Some("127.0.0.1:0"),
        Some(Path::new("/t/v.vcl")),
        Path::new("/t"),
    );
    assert!(t.contains("default_ttl = \"10000ms\""), "{t}");
    assert!(t.contains("grace = \"500ms\""), "{t}");
    assert!(t.contains("memory_size = 1048576"), "{t}");
    assert!(t.contains("[http2]\nh2c = true"), "{t}");
    assert!(
        t.contains(
            "[esi]\nconcurrency = 1\ndisable_xml_check = false\nhosts = [\"*\"]\nignore_other_elements = true"
        ),
        "{t}"
    );
    assert!(
        t.contains("max_retries = 4\nfile = \"/t/v.vcl\"\nerr_unref = false"),
        "{t}"
    );
    assert!(t.contains("connect_timeout = \"1500ms\""), "{t}");
    assert!(t.contains("match_limit = 10000\n"), "{t}");
    let parsed: toml::Value = toml::from_str(&t).unwrap();
    assert_eq!(parsed["server"]["listen"][0].as_str(), Some("127.0.0.1:0"));
    assert_eq!(
        parsed["server"]["listen_unix"][0].as_str(),
        Some("/t/v1.sock"),
        "a path is a Unix socket's (varnishd -a PATH)"
    );
    s.reset("default_ttl").unwrap();
    assert!(
        s.toml(None, None, None, Path::new("/t"))
            .contains("\"120000ms\"")
    );
}

/// `timeout_idle` is both how long a keep-alive connection waits for its next request and
/// how long a new one waits for its first (Shellac's `header_read_timeout`, which also bounds
/// a PROXY header); `-proto PROXY` turns the protocol on for the file's loopback clients.
#[test]
fn timeout_idle_bounds_the_first_request_and_proto_proxy() {
    let mut s = Settings::default();
    let get = |s: &Settings, k: &'static str| s.values.get(&("server", k)).cloned();
    assert_eq!(get(&s, "idle_timeout").as_deref(), Some("\"5000ms\""));
    assert_eq!(
        get(&s, "header_read_timeout").as_deref(),
        Some("\"5000ms\"")
    );
    assert_eq!(s.set("timeout_idle", "2"), Ok(()));
    assert_eq!(
        get(&s, "header_read_timeout").as_deref(),
        Some("\"2000ms\"")
    );
    assert_eq!(get(&s, "proxy_protocol"), None);
    s.proxy_protocol();
    let toml = s.toml(None, None, None, std::path::Path::new("/tmp"));
    assert!(toml.contains("proxy_protocol = true\n"), "{toml}");
    assert!(
        toml.contains("proxy_protocol_from = [\"127.0.0.0/8\", \"::1/128\"]\n"),
        "{toml}"
    );
}
