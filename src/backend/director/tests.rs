//! Unit tests of `director.rs`.

use super::*;

fn setup(kind: &str, extra: &str, n: usize) -> Backends {
    let mut text = String::new();
    let mut names = Vec::new();
    for i in 0..n {
        text.push_str(&format!(
            "[[backend]]\nname = \"b{i}\"\nhost = \"127.0.0.1\"\nport = {}\nweight = {}\n\n",
            9000 + i,
            i + 1
        ));
        names.push(format!("\"b{i}\""));
    }
    text.push_str(&format!(
        "[[director]]\nname = \"d\"\ntype = \"{kind}\"\nbackends = [{}]\n{extra}\n",
        names.join(", ")
    ));
    let config = Config::parse(&text, "t.toml").unwrap();
    Backends::build(&config, &Arc::new(Counters::default()))
}

fn pick(b: &Backends, path: &str, exclude: &[Arc<Backend>]) -> String {
    let key = CacheKey::new("h", path);
    let headers = HeaderMap::new();
    let ctx = Pick {
        key: &key,
        headers: &headers,
        client: "127.0.0.1".parse().unwrap(),
        exclude,
        hash: None,
        draw: None,
    };
    b.default
        .pick(&ctx)
        .map(|b| b.name().to_string())
        .unwrap_or_default()
}

#[test]
fn round_robin_cycles_and_skips_excluded() {
    let b = setup("round_robin", "", 3);
    let seq: Vec<String> = (0..6).map(|_| pick(&b, "/", &[])).collect();
    assert_eq!(seq, ["b0", "b1", "b2", "b0", "b1", "b2"]);
    let excl = vec![b.backends[1].clone()];
    let seq: Vec<String> = (0..4).map(|_| pick(&b, "/", &excl)).collect();
    assert!(!seq.contains(&"b1".to_string()));
}

#[test]
fn fallback_takes_first_available() {
    let b = setup("fallback", "", 3);
    assert_eq!(pick(&b, "/", &[]), "b0");
    assert_eq!(pick(&b, "/", &[b.backends[0].clone()]), "b1");
    assert_eq!(pick(&b, "/", &b.backends.clone()), "");
}

#[test]
fn random_honours_weights() {
    let b = setup("random", "", 3); // weights 1, 2, 3
    let mut counts = HashMap::new();
    for _ in 0..60_000 {
        *counts.entry(pick(&b, "/", &[])).or_insert(0u32) += 1;
    }
    for (name, share) in [("b0", 1.0 / 6.0), ("b1", 2.0 / 6.0), ("b2", 3.0 / 6.0)] {
        let got = counts[name] as f64 / 60_000.0;
        assert!((got - share).abs() < 0.02, "{name}: {got} vs {share}");
    }
}

/// vmod_directors' `hash.add_backend(b, w)`: keys spread in proportion to the weights,
/// each key always to the same member, and a member left out keeps the others' keys put.
#[test]
fn weighted_hash_spreads_keys_by_weight() {
    let mut text = String::new();
    for i in 0..3 {
        text.push_str(&format!(
            "[[backend]]\nname = \"b{i}\"\nhost = \"127.0.0.1\"\n\n"
        ));
    }
    text.push_str(
        "[[director]]\nname = \"d\"\ntype = \"hash\"\nbackends = [\"b0\", \"b1\", \"b2\"]\n",
    );
    let mut config = Config::parse(&text, "t.toml").unwrap();
    config.directors[0].member_weights = vec![100, 200, 300];
    let b = Backends::build(&config, &Arc::new(Counters::default()));
    let mut counts = HashMap::new();
    let mut first = Vec::new();
    for i in 0..30_000 {
        let who = pick(&b, &format!("/{i}"), &[]);
        *counts.entry(who.clone()).or_insert(0u32) += 1;
        first.push(who);
    }
    for (name, share) in [("b0", 1.0 / 6.0), ("b1", 2.0 / 6.0), ("b2", 3.0 / 6.0)] {
        let got = counts[name] as f64 / 30_000.0;
        assert!((got - share).abs() < 0.02, "{name}: {got} vs {share}");
    }
    let b0 = vec![b.backends[0].clone()];
    for (i, was) in first.iter().enumerate().take(3_000) {
        let path = format!("/{i}");
        assert_eq!(&pick(&b, &path, &[]), was, "the same key, the same member");
        let now = pick(&b, &path, &b0);
        if was != "b0" {
            assert_eq!(&now, was, "b0 out: {path} stays");
        } else {
            assert_ne!(now, "b0");
        }
    }
}

#[test]
fn nested_directors() {
    let text = "[[backend]]\nname = \"a\"\nhost = \"h\"\n\n[[backend]]\nname = \"b\"\nhost = \"h\"\n\n[[backend]]\nname = \"c\"\nhost = \"h\"\n\n[[director]]\nname = \"outer\"\ntype = \"fallback\"\nbackends = [\"inner\", \"c\"]\n\n[[director]]\nname = \"inner\"\ntype = \"round_robin\"\nbackends = [\"a\", \"b\"]\n";
    let config = Config::parse(text, "t.toml").unwrap();
    let b = Backends::build(&config, &Arc::new(Counters::default()));
    assert_eq!(b.default.name(), "outer");
    assert_eq!([pick(&b, "/", &[]), pick(&b, "/", &[])], ["a", "b"]);
    let both = vec![b.backends[0].clone(), b.backends[1].clone()];
    assert_eq!(pick(&b, "/", &both), "c", "inner exhausted: fall back to c");
}

/// Issue 21 (varnishtest 2.1.5 v00026, v00028): a 2.x VCL program's hash and client
/// directors take the member Varnish 2.1 takes — the draw from the SHA-256 of the hash
/// inputs (`URL#host#`) or the client identity, laid on the cumulative weights — and an
/// excluded (or sick) one gives way to the rendezvous order.
#[test]
fn a_legacy_draw_picks_the_member_varnish_21_picks() {
    let text = "[[backend]]\nname = \"s1\"\nhost = \"h\"\n\n[[backend]]\nname = \"s2\"\nhost = \"h\"\n\n[[director]]\nname = \"d\"\ntype = \"hash\"\nbackends = [\"s1\", \"s2\"]\n";
    let config = Config::parse(text, "t.toml").unwrap();
    let b = Backends::build(&config, &Arc::new(Counters::default()));
    let key = CacheKey::new("h", "/");
    let headers = HeaderMap::new();
    let pick = |input: &str, exclude: &[Arc<Backend>]| {
        let ctx = Pick {
            key: &key,
            headers: &headers,
            client: "127.0.0.1".parse().unwrap(),
            exclude,
            hash: None,
            draw: Some(legacy_draw(input.as_bytes())),
        };
        b.default.pick(&ctx).map(|b| b.name().to_string())
    };
    for (input, want) in [
        ("/12#127.0.0.1#", "s1"),
        ("/1#127.0.0.1#", "s2"),
        ("/13#127.0.0.1#", "s1"),
        ("/15#127.0.0.1#", "s2"),
        ("127.0.0.1", "s2"),
        ("foo", "s1"),
        ("baz", "s2"),
    ] {
        assert_eq!(pick(input, &[]).as_deref(), Some(want), "{input}");
    }
    let s1 = vec![b.backends[0].clone()];
    assert_eq!(
        pick("foo", &s1).as_deref(),
        Some("s2"),
        "s1 tried: the next one"
    );
}

#[test]
fn hash_is_stable_and_moves_about_one_nth() {
    let b = setup("hash", "", 4);
    let keys: Vec<String> = (0..4000).map(|i| format!("/k{i}")).collect();
    let before: Vec<String> = keys.iter().map(|k| pick(&b, k, &[])).collect();
    let again: Vec<String> = keys.iter().map(|k| pick(&b, k, &[])).collect();
    assert_eq!(before, again, "stable");
    let gone = vec![b.backends[2].clone()];
    let after: Vec<String> = keys.iter().map(|k| pick(&b, k, &gone)).collect();
    let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    let owned_by_gone = before.iter().filter(|n| *n == "b2").count();
    assert_eq!(moved, owned_by_gone, "only the removed backend's keys move");
    assert!((800..1200).contains(&moved), "about 1/4 of keys: {moved}");
}
