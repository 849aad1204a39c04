//! Offline dependency audit: Cargo.lock against the RustSec advisories checked in at
//! `.ci/advisories.toml` (CI machines cannot fetch the advisory database `cargo audit` needs).
//! Fails on a locked version inside an advisory's affected range, and on a locked crate nobody
//! looked up. Version ranges follow Cargo's semver rules (a bare version is `^version`).

use std::cmp::Ordering;

const LIST: &str = include_str!("../.ci/advisories.toml");
const LOCK: &str = include_str!("../Cargo.lock");

/// `major.minor.patch[-pre][+build]`; build metadata is ignored, a pre-release sorts before
/// its release.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Version {
    nums: [u64; 3],
    pre: Option<String>,
}

impl Version {
    fn parse(s: &str) -> Result<Version, String> {
        let s = s.trim();
        let core = s.split('+').next().unwrap_or(s);
        let (nums, pre) = match core.split_once('-') {
            Some((n, p)) => (n, Some(p.to_string())),
            None => (core, None),
        };
        let parts: Vec<&str> = nums.split('.').collect();
        if parts.len() != 3 {
            return Err(format!("`{s}` is not major.minor.patch"));
        }
        let mut out = [0u64; 3];
        for (slot, p) in out.iter_mut().zip(&parts) {
            *slot = p
                .parse()
                .map_err(|_| format!("`{s}`: `{p}` is not a number"))?;
        }
        Ok(Version { nums: out, pre })
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nums
            .cmp(&other.nums)
            .then_with(|| match (&self.pre, &other.pre) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Whether `v` satisfies a requirement such as `">= 1.5.1, < 1.6.0"`, `"^0.3.24"`, `"0.13.10"`.
fn matches(req: &str, v: &Version) -> Result<bool, String> {
    for comparator in req.split(',') {
        let c = comparator.trim();
        let (op, rest) = [">=", "<=", ">", "<", "=", "^"]
            .iter()
            .find_map(|op| c.strip_prefix(op).map(|r| (*op, r)))
            .unwrap_or(("^", c));
        let bound = Version::parse(rest)?;
        let ok = match op {
            ">=" => *v >= bound,
            "<=" => *v <= bound,
            ">" => *v > bound,
            "<" => *v < bound,
            "=" => *v == bound,
            _ => {
                // ^M.m.p: the same leftmost non-zero component.
                let [ma, mi, pa] = bound.nums;
                let upper = match (ma, mi) {
                    (0, 0) => [0, 0, pa + 1],
                    (0, _) => [0, mi + 1, 0],
                    _ => [ma + 1, 0, 0],
                };
                *v >= bound
                    && *v
                        < Version {
                            nums: upper,
                            pre: Some("0".into()),
                        }
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

struct Advisory {
    id: String,
    package: String,
    title: String,
    patched: Vec<String>,
    unaffected: Vec<String>,
}

fn strings(t: &toml::Table, key: &str) -> Vec<String> {
    t.get(key)
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn list() -> (Vec<Advisory>, Vec<String>) {
    let t: toml::Table = toml::from_str(LIST).expect(".ci/advisories.toml parses");
    let text = |a: &toml::Table, k: &str| {
        a.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_else(|| panic!("advisory without `{k}`: {a:?}"))
            .to_string()
    };
    let advisories = t
        .get("advisory")
        .and_then(|v| v.as_array())
        .expect("[[advisory]] entries")
        .iter()
        .map(|a| {
            let a = a.as_table().expect("advisory is a table");
            Advisory {
                id: text(a, "id"),
                package: text(a, "package"),
                title: text(a, "title"),
                patched: strings(a, "patched"),
                unaffected: strings(a, "unaffected"),
            }
        })
        .collect();
    (advisories, strings(&t, "reviewed"))
}

/// (name, version) of every package in a lock file but Shellac itself: the registry's and the
/// vendored ones (`vendor/`, no source: a patched release is checked as that release).
fn locked(lock: &str) -> Vec<(String, String)> {
    let t: toml::Table = toml::from_str(lock).expect("Cargo.lock parses");
    t.get("package")
        .and_then(|v| v.as_array())
        .expect("[[package]] entries")
        .iter()
        .filter_map(|p| {
            let p = p.as_table()?;
            if p.get("source").is_none() && p.get("name")?.as_str()? == "shellac" {
                return None;
            }
            Some((
                p.get("name")?.as_str()?.to_string(),
                p.get("version")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

/// One line per locked version inside an advisory's affected range.
fn vulnerable(lock: &str, advisories: &[Advisory]) -> Vec<String> {
    let mut found = Vec::new();
    for (name, version) in locked(lock) {
        let v = Version::parse(&version).unwrap_or_else(|e| panic!("{name}: {e}"));
        for a in advisories.iter().filter(|a| a.package == name) {
            let any = |reqs: &[String]| {
                reqs.iter()
                    .any(|r| matches(r, &v).unwrap_or_else(|e| panic!("{}: {e}", a.id)))
            };
            if !any(&a.patched) && !any(&a.unaffected) {
                found.push(format!(
                    "{name} {version}: {} {} (patched: {})",
                    a.id,
                    a.title,
                    a.patched.join(" | ")
                ));
            }
        }
    }
    found
}

#[test]
fn locked_versions_carry_every_advisory_fix() {
    let (advisories, _) = list();
    let found = vulnerable(LOCK, &advisories);
    assert!(
        found.is_empty(),
        "Cargo.lock holds versions with known advisories; upgrade them:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_locked_crate_was_looked_up() {
    let (advisories, reviewed) = list();
    let mut missing: Vec<String> = locked(LOCK)
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| !reviewed.contains(n) && !advisories.iter().any(|a| &a.package == n))
        .collect();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "look these crates up in the RustSec database (crates/<name>/) and add their advisories \
         or their names to `reviewed` in .ci/advisories.toml: {missing:?}"
    );
}

#[test]
fn the_list_is_well_formed() {
    let (advisories, _) = list();
    assert!(advisories.len() >= 30);
    let mut ids: Vec<&str> = advisories.iter().map(|a| a.id.as_str()).collect();
    for id in &ids {
        let b = id.as_bytes();
        assert!(
            id.len() == 17
                && id.starts_with("RUSTSEC-")
                && b[12] == b'-'
                && id[8..12].bytes().all(|c| c.is_ascii_digit())
                && id[13..].bytes().all(|c| c.is_ascii_digit())
                && &id[13..] != "0000",
            "{id} is not an assigned RUSTSEC-YYYY-NNNN id"
        );
    }
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate ids");
    let zero = Version::parse("0.0.0").unwrap();
    for a in &advisories {
        assert!(!a.patched.is_empty(), "{}: no patched range", a.id);
        for r in a.patched.iter().chain(&a.unaffected) {
            matches(r, &zero).unwrap_or_else(|e| panic!("{}: {e}", a.id));
        }
    }
}

#[test]
fn ranges_match_like_cargo() {
    let v = |s: &str| Version::parse(s).unwrap();
    let m = |r: &str, s: &str| matches(r, &v(s)).unwrap();
    assert!(m(">= 0.14.10", "0.14.10") && !m(">= 0.14.10", "0.14.9"));
    assert!(m(">= 0.14.10", "1.12.0"));
    assert!(m("^1.8.1", "1.9.0") && !m("^1.8.1", "2.0.0") && !m("^1.8.1", "1.8.0"));
    assert!(m("^0.3.24", "0.3.30") && !m("^0.3.24", "0.4.0"));
    assert!(m("0.13.10", "0.13.11") && !m("0.13.10", "0.14.0"));
    assert!(m(">= 1.5.1, < 1.6.0", "1.5.2") && !m(">= 1.5.1, < 1.6.0", "1.6.0"));
    // A pre-release sorts before its release; build metadata is ignored.
    assert!(m(">= 0.4.8, < 1.0.0-0", "0.9.0") && !m(">= 0.4.8, < 1.0.0-0", "1.0.0"));
    assert!(m(">= 1.2.0", "1.2.1+spec-1.1.0"));
    assert!(m("=0.15.0", "0.15.0") && !m("=0.15.0", "0.15.1"));
    assert!(Version::parse("1.2").is_err() && Version::parse("x.1.2").is_err());
}

/// The check really fails on a vulnerable lock file: versions just below the fixes.
#[test]
fn a_vulnerable_lock_is_refused() {
    let (advisories, _) = list();
    let lock = r#"
version = 4

[[package]]
name = "shellac"
version = "0.1.0"

[[package]]
name = "hyper"
version = "0.14.9"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "tokio"
version = "1.38.1"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "h2"
version = "0.4.3"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "smallvec"
version = "1.16.5"
source = "registry+https://github.com/rust-lang/crates.io-index"
"#;
    let found = vulnerable(lock, &advisories);
    let ids: Vec<&str> = found
        .iter()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(
        ids,
        vec![
            "RUSTSEC-2021-0078",
            "RUSTSEC-2021-0079",
            "RUSTSEC-2022-0022",
            "RUSTSEC-2025-0023",
            "RUSTSEC-2024-0332",
            "RUSTSEC-2026-0258",
        ],
        "{found:#?}"
    );
}
