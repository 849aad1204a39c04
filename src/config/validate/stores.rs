//! Checks of `[[storage.named]]` and of the storage names rules give: a name that is not one,
//! `s0`, a name given twice, more names than the memory tier keeps accounts for, a size larger
//! than the memory tier, a rule's `storage` that no storage has.

use super::problems::Problems;
use crate::config::{Config, MAX_NAMED_STORAGES as MAX_NAMED, units};

fn at(i: usize, field: &str) -> Vec<String> {
    vec![
        "storage".into(),
        "named".into(),
        i.to_string(),
        field.into(),
    ]
}

/// Whether `name` is a storage name VCL can write as `storage.NAME`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether `name` names a storage of `c`: `s0`, `Transient` or a `[[storage.named]]`.
pub(crate) fn declared(c: &Config, name: &str) -> bool {
    name.eq_ignore_ascii_case("s0")
        || name.eq_ignore_ascii_case("Transient")
        || c.storage
            .named
            .iter()
            .any(|n| n.name.eq_ignore_ascii_case(name))
}

/// Every problem of the named storages and of the rules' `storage`.
pub(super) fn stores(c: &Config, out: &mut Problems) {
    let mut others = 0;
    for (i, s) in c.storage.named.iter().enumerate() {
        if !valid_name(&s.name) {
            out.push((
                at(i, "name"),
                format!(
                    "`{}` is not a storage name: letters, digits, `_` and `-`, starting with a letter",
                    s.name
                ),
            ));
        } else if s.name.eq_ignore_ascii_case("s0") {
            out.push((
                at(i, "name"),
                "`s0` is the memory tier itself (cache.memory_size): give the storage another name"
                    .into(),
            ));
        }
        if c.storage.named[..i]
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&s.name))
        {
            out.push((
                at(i, "name"),
                format!(
                    "a storage named `{}` is declared before (letter case ignored)",
                    s.name
                ),
            ));
        }
        if !s.name.eq_ignore_ascii_case("Transient") {
            others += 1;
            if others == MAX_NAMED + 1 {
                out.push((
                    at(i, "name"),
                    format!("at most {MAX_NAMED} named storages besides `Transient`: the memory tier keeps an account for each"),
                ));
            }
        }
        if let Some(size) = s.size
            && size.0 > c.cache.memory_size.0
        {
            out.push((
                at(i, "size"),
                format!(
                    "{} is more than the whole memory tier (cache.memory_size = {}): a named storage is a part of it",
                    units::size_text(size.0),
                    units::size_text(c.cache.memory_size.0)
                ),
            ));
        }
    }
    for (i, rule) in c.rules.iter().enumerate() {
        if let Some(name) = &rule.storage
            && !declared(c, name)
        {
            out.push((
                vec!["rule".into(), i.to_string(), "storage".into()],
                unknown(c, name),
            ));
        }
    }
    for (i, site) in c.sites.iter().enumerate() {
        for (j, rule) in site.rules.iter().flatten().enumerate() {
            if let Some(name) = &rule.storage
                && !declared(c, name)
            {
                out.push((
                    vec![
                        "site".into(),
                        i.to_string(),
                        "rule".into(),
                        j.to_string(),
                        "storage".into(),
                    ],
                    unknown(c, name),
                ));
            }
        }
    }
}

fn unknown(c: &Config, name: &str) -> String {
    let mut names = vec!["s0".to_string(), "Transient".to_string()];
    names.extend(
        c.storage
            .named
            .iter()
            .filter(|n| !n.name.eq_ignore_ascii_case("Transient"))
            .map(|n| n.name.clone()),
    );
    format!(
        "no storage is named `{name}` (the configuration's storages: {}); declare it with [[storage.named]] name = \"{name}\"",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn errors(text: &str) -> Vec<(usize, String)> {
        match Config::parse(
            &format!("{text}[[backend]]\nhost = \"127.0.0.1\"\n"),
            "t.toml",
        ) {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| (e.line, e.message)).collect(),
        }
    }

    #[test]
    fn named_storages_are_checked_with_their_line() {
        assert_eq!(
            errors("[[storage.named]]\nname = \"images\"\nsize = \"1MiB\"\n"),
            vec![]
        );
        let e = errors(
            "[cache]\nmemory_size = \"64MiB\"\n[[storage.named]]\nname = \"s0\"\n[[storage.named]]\nname = \"a b\"\n[[storage.named]]\nname = \"Images\"\nsize = \"128MiB\"\n[[storage.named]]\nname = \"images\"\n",
        );
        let lines: Vec<usize> = e.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, vec![4, 6, 9, 11], "{e:?}");
        assert!(e[0].1.contains("memory tier itself"), "{e:?}");
        assert!(e[1].1.contains("not a storage name"), "{e:?}");
        assert!(e[2].1.contains("more than the whole memory tier"), "{e:?}");
        assert!(e[3].1.contains("declared before"), "{e:?}");
    }

    #[test]
    fn a_rule_naming_an_undeclared_storage_is_refused_with_its_line() {
        let e = errors(
            "[[storage.named]]\nname = \"images\"\n[[rule]]\npath = \"^/img/\"\nstorage = \"imagez\"\n[[rule]]\npath = \"^/t/\"\nstorage = \"transient\"\n",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].0, 5);
        assert!(
            e[0].1.contains(
                "no storage is named `imagez` (the configuration's storages: s0, Transient, images)"
            ),
            "{e:?}"
        );
    }
}
