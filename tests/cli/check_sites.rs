//! `shellac check` on `[[site]]` mistakes (issue 31): two default sites on one listen address,
//! a name two sites claim there, a regular expression that does not compile, a name that is
//! none (nginx's space-separated list pasted as one entry) — each named
//! as file:line:column and key by the binary.

use super::common::binary::run as shellac;
use super::common::*;

#[test]
fn check_names_file_line_and_key_for_each_site_mistake() {
    let dir = TempDir::new("cli-check-sites");
    let bad = dir.path("sites.toml");
    std::fs::write(
        &bad,
        r#"[server]
listen = ["127.0.0.1:6081"]

[[backend]]
host = "127.0.0.1"
port = 8080

[[site]]
name = "a"
default = true
server_name = "www.example.org"

[[site]]
name = "b"
default = true
server_name = ["b.example.org", "WWW.example.org"]

[[site]]
name = "c"
server_name = "~^(www"

[[site]]
name = "d"
server_name = "www.d.org d.org"
"#,
    )
    .unwrap();
    let (code, _, err) = shellac(&["check", "--file-only", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    let file = bad.display().to_string();
    for expected in [
        format!("{file}:15:1: `site.1.default`: 127.0.0.1:6081 has two default sites: `a` and `b`"),
        format!(
            "{file}:16:33: `site.1.server_name.1`: server name \"www.example.org\" is claimed by two sites on one listen address (127.0.0.1:6081)"
        ),
        format!(
            "{file}:20:1: `site.2.server_name.0`: \"~^(www\": the regular expression does not compile"
        ),
        // nginx's space-separated list pasted as one entry would never match a host.
        format!(
            "{file}:24:1: `site.3.server_name.0`: \"www.d.org d.org\": a server name has no spaces"
        ),
    ] {
        assert!(err.contains(&expected), "{expected}\nnot in:\n{err}");
    }
    assert!(err.contains("4 errors"), "{err}");
}
