//! Named storages (`[[storage.named]]`, docs/configuration.md): parts of the memory tier with a
//! size and counters of their own, chosen per object by a rule's `storage` (VCL's
//! `beresp.storage` is in tests/vcl/varnish.rs).

use crate::common::{Origin, Reply, Shellac, get};

/// `GET /storages`: the storage named `name`.
async fn storage(shellac: &Shellac, name: &str) -> serde_json::Value {
    let all: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/storages").await.body).unwrap();
    all.as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name).cloned())
        .unwrap_or_else(|| panic!("no storage {name} in {all}"))
}

/// Images put in a 256 KiB storage by a rule evict each other, least used first, and never the
/// pages in `s0`; `Transient` takes what a rule sends there; `/storages` and `/metrics`
/// count what each holds, stored and evicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_puts_objects_in_a_named_storage_held_to_its_size() {
    let origin = Origin::start(|s| {
        let body = if s.path.starts_with("/img/") {
            "i".repeat(64 << 10)
        } else {
            s.path.clone()
        };
        Reply::ok(&body).cc("max-age=3600")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        let parsed = shellac::config::Config::parse(
            "[[backend]]\nhost = \"h\"\n\n[[storage.named]]\nname = \"images\"\nsize = \"256KiB\"\n\n\
             [[rule]]\npath = '^/img/'\nstorage = \"images\"\n\n\
             [[rule]]\npath = '^/short/'\nstorage = \"transient\"\n",
            "storages.toml",
        )
        .unwrap();
        c.rules = parsed.rules;
        c.storage.named = parsed.storage.named;
    })
    .await;
    let page = get(shellac.addr, "/page").await;
    assert_eq!(page.status, 200);
    for i in 0..8 {
        let r = get(shellac.addr, &format!("/img/{i}")).await;
        assert_eq!(r.body.len(), 64 << 10);
    }
    assert_eq!(get(shellac.addr, "/short/a").await.status, 200);
    // The page in s0 survived eight 64 KiB images: they evicted each other.
    let again = get(shellac.addr, "/page").await;
    assert!(
        again.cache_status().contains("hit"),
        "{}",
        again.cache_status()
    );
    let images = storage(&shellac, "images").await;
    assert_eq!(images["size"], 256 << 10, "{images}");
    assert_eq!(images["stored"], 8, "{images}");
    let (held, evicted) = (
        images["objects"].as_u64().unwrap(),
        images["evicted"].as_u64().unwrap(),
    );
    assert!((1..=3).contains(&held), "{images}");
    assert_eq!(held + evicted, 8, "{images}");
    assert!(images["bytes"].as_u64().unwrap() <= 256 << 10, "{images}");
    assert!(
        images["bytes"].as_u64().unwrap() >= held * (64 << 10),
        "{images}"
    );
    assert!(shellac.stat("n_lru_nuked").await >= evicted);
    // The newest image is one of those kept.
    let last = get(shellac.addr, "/img/7").await;
    assert!(
        last.cache_status().contains("hit"),
        "{}",
        last.cache_status()
    );
    let transient = storage(&shellac, "Transient").await;
    assert_eq!(
        (
            &transient["objects"],
            &transient["stored"],
            &transient["size"]
        ),
        (&1.into(), &1.into(), &serde_json::Value::Null),
        "{transient}"
    );
    let s0 = storage(&shellac, "s0").await;
    assert!(s0["objects"].as_u64().unwrap() >= 2 + held, "{s0}");
    assert_eq!(origin.count_path("/page"), 1);
    let metrics = get(shellac.admin, "/metrics").await.text();
    assert!(
        metrics.contains("shellac_storage_stored_total{storage=\"images\"} 8"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shellac_storage_size_bytes{storage=\"images\"} 262144"),
        "{metrics}"
    );
    shellac.stop().await;
    origin.stop();
}
