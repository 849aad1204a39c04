//! Issue 32 "every error in one pass": the words of config errors a new operator meets first,
//! each test named after the defect it keeps fixed.

use super::Config;
use super::settings::{self, SECTIONS};

fn errors(text: &str) -> Vec<String> {
    Config::parse(text, "t.toml")
        .unwrap_err()
        .iter()
        .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
        .collect()
}

#[test]
fn a_bad_regex_is_reported_with_unknown_key_and_duration_errors_in_one_pass() {
    let text = "[server]\nidle_timout = \"5s\"\n[[backend]]\nhost = \"a\"\n[[rule]]\nurl = \"^/(foo\"\nttl = \"1 hour\"\nfoo = 1\n";
    let got = errors(text);
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(
        got[0].starts_with("2:server.idle_timout: unknown key"),
        "{got:#?}"
    );
    assert_eq!(got[1], "6:rule.0.url: invalid regex: error: unclosed group");
    assert!(
        got[2].starts_with("7:rule.0.ttl: unknown duration unit `hour`"),
        "{got:#?}"
    );
    assert!(
        got[3].starts_with("8:rule.0.foo: unknown key `foo`"),
        "{got:#?}"
    );
}

#[test]
fn an_array_of_tables_written_as_one_table_says_write_double_brackets() {
    let text = "[[backend]]\nhost = \"a\"\n[[tls]]\nlisten = \"127.0.0.1:8443\"\n[tls.certificate]\ncert = \"/nonexistent/a.pem\"\nkey = \"/nonexistent/a.key\"\n[rule]\nurl = \"^/(x\"\n";
    let got = errors(text);
    assert!(
        got.contains(&"5:tls.certificate: write `[[tls.certificate]]` (an array of tables: one `[[tls.certificate]]` header for each), not `[tls.certificate]`".to_string()),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .all(|e| !e.contains("expected a table, found a table")),
        "{got:#?}"
    );
    // Read on as if written right: the next table's errors are there too.
    assert!(
        got.iter()
            .any(|e| e.starts_with("8:rule: write `[[rule]]`")),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|e| e.starts_with("9:rule.0.url: invalid regex")),
        "{got:#?}"
    );
    // `[[tls.certificate]]` with no `[[tls]]` to belong to.
    let text =
        "[[backend]]\nhost = \"a\"\n[[tls.certificate]]\ncert = \"a.pem\"\nkey = \"a.key\"\n";
    let got = errors(text);
    assert!(
        got.iter().any(|e| e.starts_with("3:tls.certificate: `[[tls.certificate]]` belongs to the `[[tls]]` above it, and there is none")),
        "{got:#?}"
    );
}

#[test]
fn listen_as_one_port_says_write_an_address_not_that_a_list_is_required() {
    let got = errors("[server]\nlisten = 443\n[[backend]]\nhost = \"a\"\n");
    assert_eq!(
        got,
        [
            "2:server.listen: `443` is a port, not an address: write \"0.0.0.0:443\" (every IPv4 address), \"[::]:443\" (every IPv6 and IPv4 address) or \"127.0.0.1:443\" (this machine only)"
        ]
    );
    assert!(got.iter().all(|e| !e.contains("list of")), "{got:#?}");
    // A type error does not claim a list is required either: one address is accepted.
    let phrase = settings::find("server", "listen").unwrap().kind.phrase();
    assert!(phrase.starts_with("an address such as"), "{phrase}");
}

#[test]
fn a_host_name_in_listen_says_it_must_be_an_ip_address() {
    let got = errors(
        "[server]\nlisten = [\"localhost:8080\"]\n[[backend]]\nhost = \"a\"\n[[tls]]\nlisten = \"www.example.com:443\"\ncertificate = []\n",
    );
    assert!(
        got[0].starts_with("2:server.listen: `localhost:8080`: a listen address must be an IP address, not a host name")
            && got[0].ends_with("write \"127.0.0.1:8080\" (and \"[::1]:8080\" for IPv6)"),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|e| e.starts_with(
            "6:tls.0.listen: `www.example.com:443`: a listen address must be an IP address"
        )),
        "{got:#?}"
    );
    let got = errors(
        "[server]\nlisten = \"127.0.0.1\"\nadmin = \"localhost:6082\"\n[[backend]]\nhost = \"a\"\n",
    );
    assert_eq!(
        got[0],
        "2:server.listen: `127.0.0.1` has no port: write it as \"127.0.0.1:6081\""
    );
    assert!(
        got[1].starts_with(
            "3:server.admin: `localhost:6082`: a listen address must be an IP address"
        ),
        "{got:#?}"
    );
    assert!(
        got[1].ends_with("; or \"off\" for no admin listener"),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .all(|e| !e.contains("invalid socket address syntax"))
    );
}

/// Each section's smallest file with `line` added to the section's table.
fn with_key(section: &settings::Section, line: &str) -> String {
    if section.inline {
        return section.context.replacen("{ ", &format!("{{ {line}, "), 1);
    }
    let (header, rest) = section.context.split_once('\n').unwrap();
    format!("{header}\n{line}\n{rest}")
}

#[test]
fn every_unknown_key_gets_a_did_you_mean() {
    // A typo of every key of every table.
    for section in SECTIONS {
        for s in settings::of(section.name) {
            let mut typo = s.key.to_string();
            let last = typo.pop().unwrap();
            typo.push(if last == 'q' { 'z' } else { 'q' });
            let text = with_key(section, &format!("{typo} = 1"));
            let got = errors(&text);
            let hit = got
                .iter()
                .find(|e| e.contains(&format!("unknown key `{typo}`")));
            assert!(
                hit.is_some_and(|e| e.contains(&format!("did you mean `{}`?", s.key))),
                "{}.{typo}: {got:#?}\n{text}",
                section.name
            );
        }
    }
    // A key of another table, or another proxy's word for a setting.
    let got = errors(
        "[server]\nmemory_size = \"1GiB\"\nport = 80\n[cache]\nttl = \"1h\"\n[[backend]]\nhost = \"a\"\n",
    );
    assert_eq!(
        got,
        [
            "2:server.memory_size: unknown key `memory_size` in [server]; `memory_size` is a key of [cache]: did you mean to write it there?",
            "3:server.port: unknown key `port` in [server]; did you mean `listen`?",
            "5:cache.ttl: unknown key `ttl` in [cache]; did you mean `default_ttl`?",
        ]
    );
    let got = errors("[disk]\npath = \"/x\"\n[[backend]]\nhost = \"a\"\n");
    assert_eq!(
        got,
        ["1:disk: unknown table `[disk]`; did you mean `[storage.disk]`?"]
    );
}
