//! Parsing and checking of backends, probes, directors and routing.

use super::*;
use crate::config::Config;

const BASE: &str = "[[backend]]\nname = \"a\"\nhost = \"127.0.0.1\"\nport = 8080\n\n[[backend]]\nname = \"b\"\nhost = \"127.0.0.1\"\nport = 8081\n";

#[test]
fn directors_probes_and_routing_parse() {
    let text = format!(
        "[routing]\ndefault = \"web\"\n\n{BASE}probe = \"health\"\n\n[[probe]]\nname = \"health\"\nurl = \"/ping\"\nwindow = 10\nthreshold = 8\n\n[[director]]\nname = \"web\"\ntype = \"random\"\nbackends = [\"a\", \"b\"]\nrestart_unless = [200, 302]\n"
    );
    let c = Config::parse(&text, "t.toml").unwrap();
    assert_eq!(c.default_target(), Some("web"));
    assert_eq!(c.directors[0].kind, DirectorKind::Random);
    assert!(c.directors[0].restarts_on(500));
    assert!(!c.directors[0].restarts_on(302));
    assert!(matches!(c.backends[1].probe, Some(ProbeRef::Named(ref n)) if n == "health"));
}

#[test]
fn inline_probe() {
    let text = format!(
        "{BASE}probe = {{ request = [\"GET /h HTTP/1.1\", \"Host: x\"], expected_status = 204 }}\n"
    );
    let c = Config::parse(&text, "t.toml").unwrap();
    let Some(ProbeRef::Inline(p)) = &c.backends[1].probe else {
        panic!("inline probe")
    };
    assert_eq!(p.expected_status, 204);
    assert_eq!(p.initial(), 2);
}

#[test]
fn cross_references_are_checked() {
    let text = format!(
        "[routing]\ndefault = \"nowhere\"\n\n{BASE}probe = \"missing\"\n\n[[director]]\nname = \"d1\"\ntype = \"fallback\"\nbackends = [\"a\", \"d2\"]\n\n[[director]]\nname = \"d2\"\ntype = \"hash\"\nhash_on = \"header:\"\nbackends = [\"d1\", \"zz\"]\n"
    );
    let errs = Config::parse(&text, "t.toml").unwrap_err();
    let msgs: Vec<String> = errs
        .iter()
        .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
        .collect();
    let all = msgs.join("\n");
    assert!(
        all.contains("2:routing.default: no backend or director is named `nowhere`"),
        "{all}"
    );
    assert!(
        all.contains("backend.1.probe: no [[probe]] is named `missing`"),
        "{all}"
    );
    assert!(all.contains("director `d1` contains itself"), "{all}");
    assert!(
        all.contains("no backend or director is named `zz`"),
        "{all}"
    );
    assert!(all.contains("is not a hash source"), "{all}");
}

/// Issue 23 #5: `window = 5, threshold = 8` without `initial` blamed `initial`, a key the
/// operator never wrote; ranges come from the definitions, one error per key.
#[test]
fn probe_errors_name_the_keys_written() {
    let text = format!("{BASE}\n[[probe]]\nname = \"p\"\nwindow = 5\nthreshold = 8\n");
    let errs = Config::parse(&text, "t.toml").unwrap_err();
    let got: Vec<String> = errs
        .iter()
        .map(|e| format!("{}: {}", e.key, e.message))
        .collect();
    assert_eq!(got, ["probe.0.threshold: 8 is more than window (5)"]);
    let text = format!(
        "{BASE}\n[[probe]]\nname = \"p\"\nwindow = 0\ninterval = \"0s\"\nexpected_status = 99\n"
    );
    let errs = Config::parse(&text, "t.toml").unwrap_err();
    let got: Vec<String> = errs
        .iter()
        .map(|e| format!("{}: {}", e.key, e.message))
        .collect();
    assert_eq!(
        got,
        [
            "probe.0.window: must be between 1 and 64",
            "probe.0.interval: must be greater than 0",
            "probe.0.expected_status: 99 is not an HTTP status (100-599)",
        ]
    );
}

/// What each kind needs: files a root (no host), the others a host or a Unix socket;
/// every mistake at its key.
#[test]
fn kinds_and_addresses_are_checked() {
    let ok = "[[backend]]\nprotocol = \"files\"\nroot = \"/srv/www\"\nindex = \"index.htm\"\n\n[[backend]]\nname = \"app\"\naddress = \"unix:/run/app.sock\"\n";
    let c = Config::parse(ok, "t.toml").unwrap();
    assert_eq!(c.backends[0].protocol, BackendProtocol::Files);
    assert_eq!(
        c.backends[0].index.as_deref(),
        Some(&["index.htm".to_string()][..])
    );
    assert_eq!(
        unix_path(c.backends[1].address.as_deref().unwrap())
            .unwrap()
            .to_str(),
        Some("/run/app.sock")
    );
    let bad = "[[backend]]\nprotocol = \"files\"\nindex = [\"../x\"]\nmime_types = { \".js\" = \"text/javascript\" }\n\n[[backend]]\nname = \"b\"\nhost = \"a\"\naddress = \"unix:/x.sock\"\n\n[[backend]]\nname = \"c\"\naddress = \"/relative.sock\"\n\n[[backend]]\nname = \"d\"\nroot = \"/srv\"\nhost = \"a\"\n";
    let errs = Config::parse(bad, "t.toml").unwrap_err();
    let got: Vec<String> = errs
        .iter()
        .map(|e| format!("{}: {}", e.key, e.message))
        .collect();
    let all = got.join("\n");
    for want in [
        "backend.0.root: `root` is required with `protocol = \"files\"`",
        "backend.0.index: `../x` must be a file name",
        "backend.0.mime_types: `.js` must be an extension without the dot",
        "backend.1.address: give either `host` (with `port`) or `address`, not both",
        "backend.2.address: `/relative.sock` is not `unix:` followed by an absolute path",
        "backend.3.root: only `protocol = \"files\"` and `\"fastcgi\"` have a document root",
    ] {
        assert!(all.contains(want), "{want}\n{all}");
    }
}

#[test]
fn probe_limits() {
    let text =
        format!("{BASE}\n[[probe]]\nname = \"p\"\nwindow = 4\nthreshold = 5\nurl = \"ping\"\n");
    let errs = Config::parse(&text, "t.toml").unwrap_err();
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    assert!(keys.contains(&"probe.0.threshold"), "{keys:?}");
    assert!(keys.contains(&"probe.0.url"), "{keys:?}");
}
