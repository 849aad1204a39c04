//! The definitions against the code (every key serde accepts is defined, and the other way
//! round; every default is the code's) and against the committed reference files.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

/// `context` with `line` added to the section's table: after its header, or inside its
/// inline table, or (for the top level) before everything.
fn with_line(section: Option<&Section>, line: &str) -> String {
    let Some(section) = section else {
        return format!("{line}\n{}", SECTIONS[0].context);
    };
    let context = section.context;
    if section.inline {
        let open = context.find('{').expect("inline context");
        return format!("{}{{ {line}, {}", &context[..open], &context[open + 1..]);
    }
    let header_end = context.find('\n').expect("header line");
    format!(
        "{}\n{line}{}",
        &context[..header_end],
        &context[header_end..]
    )
}

/// `context` with `key = value` in the section's table: replacing the key's value where the
/// context gives it, else added.
fn with_value(section: &Section, key: &str, value: &str) -> String {
    let context = section.context;
    let given = format!("{key} = ");
    if section.inline {
        if let Some(at) = context.find(&format!(" {given}")) {
            let start = at + 1;
            let end = start + context[start..].find([',', '}']).expect("inline table end");
            return format!("{}{given}{value} {}", &context[..start], &context[end..]);
        }
    } else if let Some(line) = context
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .find(|l| l.starts_with(&given))
    {
        return context.replacen(line, &format!("{given}{value}"), 1);
    }
    with_line(Some(section), &format!("{given}{value}"))
}

/// The keys serde accepts in a table: those its unknown-key error lists.
fn accepted(text: &str) -> BTreeSet<String> {
    let err = match toml::from_str::<Config>(text) {
        Ok(_) => panic!("an unknown key was accepted:\n{text}"),
        Err(e) => e.message().to_string(),
    };
    let listed = err
        .split_once("expected")
        .unwrap_or_else(|| panic!("not an unknown-key error: {err}\n{text}"))
        .1;
    listed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn every_key_serde_accepts_is_defined_and_every_definition_is_accepted() {
    let unknown = "zz_not_a_key = 1";
    let top: BTreeSet<String> = SECTIONS
        .iter()
        .filter(|s| !s.name.contains('.'))
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(accepted(&with_line(None, unknown)), top, "top-level tables");
    for section in SECTIONS {
        let defined: BTreeSet<String> = of(section.name).map(|s| s.key.to_string()).collect();
        let text = with_line(Some(section), unknown);
        assert_eq!(
            accepted(&text),
            defined,
            "[{}]: keys serde accepts (left) and keys defined in src/config/settings (right)",
            section.name
        );
    }
    // A backend's inline probe has the keys of a [[probe]].
    let inline = "[[backend]]\nhost = \"a\"\nprobe = { zz_not_a_key = 1 }\n";
    let defined: BTreeSet<String> = of("probe").map(|s| s.key.to_string()).collect();
    assert_eq!(accepted(inline), defined, "inline probe");
    // A site's rules have the keys of a [[rule]].
    let site_rule = "[[site]]\ndefault = true\n[[site.rule]]\nzz_not_a_key = 1\n";
    let defined: BTreeSet<String> = of("rule").map(|s| s.key.to_string()).collect();
    assert_eq!(accepted(site_rule), defined, "[[site.rule]]");
    // Every table a setting opens is a section, and every section but the top-level ones is
    // opened by a setting.
    for s in all() {
        if let Kind::Table { section } = s.kind {
            assert!(SECTIONS.iter().any(|x| x.name == section), "{section}");
            assert_eq!(format!("{}.{}", s.section, s.key), section);
        }
    }
    for section in SECTIONS.iter().filter(|s| s.name.contains('.')) {
        let (parent, key) = section.name.rsplit_once('.').unwrap();
        assert!(
            matches!(find(parent, key).map(|s| s.kind), Some(Kind::Table { .. })),
            "{}",
            section.name
        );
    }
}

/// The value at `key` of `section` in a config parsed from `text` (serialized as the diff and
/// the writer see it); None when the key is unset.
fn value_of(text: &str, section: &Section, key: &str) -> Option<Value> {
    let config = Config::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    let tree = serde_json::to_value(&config).unwrap();
    let mut at = &tree;
    let mut parts: Vec<&str> = section.name.split('.').collect();
    parts.push(key);
    for (i, part) in parts.iter().enumerate() {
        at = at.get(part)?;
        let repeated = SECTIONS
            .iter()
            .any(|s| s.array && s.name == parts[..=i].join("."));
        if repeated {
            at = at.get(0)?;
        }
    }
    (!at.is_null()).then(|| at.clone())
}

/// Each definition's default is what the code uses when the key is not given; a key without
/// a default is unset (or, for required keys, needed); every example is a valid value.
#[test]
fn defaults_are_the_codes_defaults_and_examples_are_valid() {
    for section in SECTIONS {
        for s in of(section.name) {
            let given = with_value(section, s.key, s.sample());
            if !s.example.is_empty() {
                let text = with_value(section, s.key, s.example);
                let read = toml::from_str::<Config>(&text);
                assert!(
                    read.is_ok(),
                    "{}.{}: example {}: {:?}",
                    section.name,
                    s.key,
                    s.example,
                    read.err()
                );
            }
            match s.default {
                Default::Value(v) => {
                    let implicit = value_of(section.context, section, s.key);
                    let explicit = value_of(&given, section, s.key);
                    assert!(
                        implicit.is_some(),
                        "{}.{} has no value",
                        section.name,
                        s.key
                    );
                    assert_eq!(
                        implicit, explicit,
                        "{}.{}: the code's default (left) is not the definition's `{v}`",
                        section.name, s.key
                    );
                }
                Default::Required => {
                    assert!(
                        !s.example.is_empty(),
                        "{}.{} needs an example",
                        section.name,
                        s.key
                    );
                    assert!(
                        section.context.contains(&format!("{} = ", s.key)),
                        "{}: the context must give the required `{}`",
                        section.name,
                        s.key
                    );
                }
                Default::Unset(_) => {
                    assert!(
                        !s.example.is_empty(),
                        "{}.{} needs an example",
                        section.name,
                        s.key
                    );
                    // Names are filled in (`backend0`); a [[probe]]'s context names it. A
                    // [[tls]] needs certificates or acme: its context gives certificates; a
                    // secure_link needs a secret or an md5 expression: its context, a secret.
                    if s.key != "name"
                        && (section.name, s.key) != ("tls", "certificate")
                        && (section.name, s.key) != ("rule.secure_link", "secret")
                    {
                        assert_eq!(
                            value_of(section.context, section, s.key),
                            None,
                            "{}.{} is documented as unset",
                            section.name,
                            s.key
                        );
                    }
                }
            }
        }
    }
}

/// docs/configuration.md's tables and examples/full.toml are what the definitions render.
/// After changing a definition: `SHELLAC_BLESS=1 cargo test --lib config::settings`.
#[test]
fn the_reference_is_rendered_from_the_definitions() {
    let root = env!("CARGO_MANIFEST_DIR");
    let bless = std::env::var_os("SHELLAC_BLESS").is_some();
    let md_path = format!("{root}/docs/configuration.md");
    let md = std::fs::read_to_string(&md_path).unwrap();
    let rendered = render::configuration_md(&md).unwrap();
    let toml_path = format!("{root}/examples/full.toml");
    let full = std::fs::read_to_string(&toml_path).unwrap_or_default();
    let rendered_toml = render::full_toml();
    if bless {
        std::fs::write(&md_path, &rendered).unwrap();
        std::fs::write(&toml_path, &rendered_toml).unwrap();
        return;
    }
    assert!(
        md == rendered,
        "docs/configuration.md is not what src/config/settings renders; run `{}` and commit",
        render::REGENERATE
    );
    assert!(
        full == rendered_toml,
        "examples/full.toml is not what src/config/settings renders; run `{}` and commit",
        render::REGENERATE
    );
    for section in SECTIONS.iter().filter(|s| s.name != "storage") {
        assert!(
            md.contains(&format!("<!-- settings [{}] -->", section.name)),
            "docs/configuration.md has no table for [{}]",
            section.name
        );
    }
}

/// examples/full.toml holds every setting (set, or commented out with an example) and is a
/// valid configuration.
#[test]
fn full_toml_holds_every_setting_and_is_valid() {
    let full = render::full_toml();
    Config::parse(&full, "examples/full.toml").unwrap_or_else(|e| panic!("{e:?}"));
    for s in all().filter(|s| !matches!(s.kind, Kind::Table { .. })) {
        let key = match s.section {
            "rule.synth" => format!("synth.{}", s.key),
            "rule.redirect" => format!("redirect.{}", s.key),
            "rule.rate_limit" => format!("rate_limit.{}", s.key),
            "rule.secure_link" => format!("secure_link.{}", s.key),
            "backend.tls" | "storage.shared.tls" => format!("tls.{}", s.key),
            // A list of inline tables, all keys on one line.
            "tls.certificate" => "certificate".to_string(),
            "tls.acme" => "acme".to_string(),
            _ => s.key.to_string(),
        };
        let present = full.lines().any(|l| {
            let l = l.trim_start_matches('#').trim_start();
            l.starts_with(&format!("{key} = "))
                && (!matches!(s.section, "tls.certificate" | "tls.acme")
                    || l.contains(&format!("{{ {} = ", s.key))
                    || l.contains(&format!(", {} = ", s.key)))
        });
        assert!(present, "examples/full.toml lacks {}.{}", s.section, s.key);
    }
}

#[test]
fn paths_resolve_to_settings() {
    let path = |p: &str| p.split('.').map(str::to_string).collect::<Vec<_>>();
    let (s, n) = for_path(&path("backend.0.probe.window")).unwrap();
    assert_eq!((s.section, s.key, n), ("probe", "window", 4));
    let (s, n) = for_path(&path("rule.2.request_header.X-Foo")).unwrap();
    assert_eq!((s.section, s.key, n), ("rule", "request_header", 3));
    let (s, _) = for_path(&path("rule.0.synth.status")).unwrap();
    assert_eq!((s.section, s.key), ("rule.synth", "status"));
    assert!(for_path(&path("server.nope")).is_none());
    assert!(needs_restart("cache.memory_size"));
    assert!(needs_restart("storage.disk.size"));
    assert!(!needs_restart("backend[app].port"));
    assert!(!needs_restart("server.max_connections"));
}
