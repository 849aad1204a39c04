//! Unit tests of `recover.rs`.

use super::*;

/// Reading on past errors edits the text; no edit of any text may panic, and every error
/// points into the file. Deterministic mutations of the examples (the fuzz target explores
/// further).
#[test]
fn mutated_examples_never_panic_and_errors_point_into_the_file() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut texts = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            texts.push(std::fs::read_to_string(path).unwrap());
        }
    }
    let pieces = [
        "[",
        "]",
        "=",
        "\"",
        "{",
        "}",
        "\n",
        "[[backend]]\n",
        "x = ",
        ",",
        "#",
        "\u{e9}",
        "\u{feff}",
        "[storage.disk]\n",
        "1e99",
        "-1",
        "\"off\"",
        "[]",
        "{ url = 5 }",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    for round in 0..400 {
        let mut text = texts[round % texts.len()].clone();
        for _ in 0..1 + next(4) {
            let mut at = next(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            if next(2) == 0 {
                text.insert_str(at, pieces[next(pieces.len())]);
            } else {
                let mut end = (at + next(12)).min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.replace_range(at..end, "");
            }
        }
        let lines = text.split('\n').count();
        if let Err(errors) = crate::config::Config::parse(&text, "m.toml") {
            assert!(!errors.is_empty());
            for e in errors {
                assert!(e.line <= lines, "{e:?} in:\n{text}");
            }
        }
    }
}

#[test]
fn did_you_mean() {
    let keys = ["idle_timeout", "idle_release", "listen", "admin"];
    assert_eq!(
        closest("idle_timout", keys.into_iter()),
        Some("idle_timeout")
    );
    assert_eq!(closest("Listen", keys.into_iter()), Some("listen"));
    assert_eq!(
        closest("idle-release", keys.into_iter()),
        Some("idle_release")
    );
    assert_eq!(closest("threads", keys.into_iter()), None);
    assert_eq!(distance("kitten", "sitting"), 3);
    // A swap of two neighbouring letters is one typo (issue 32: `paht` had no suggestion).
    let rule = ["name", "host", "path", "url", "ttl"];
    assert_eq!(closest("paht", rule.into_iter()), Some("path"));
    assert_eq!(closest("nmae", rule.into_iter()), Some("name"));
    assert_eq!(distance("ab", "ba"), 1);
}
