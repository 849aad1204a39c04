//! Invalidation across the fleet: purge, ban and tags reach every node, a purge racing a fill
//! wins, a soft purge leaves the shared copy stale, and resharding (a lookup and a purge during
//! ASK, writes after MOVED) is followed.

use super::*;

/// PURGE, a ban and a tag purge sent to one node: once answered, no node serves the old copy.
pub(super) async fn purge_ban_and_tags_reach_every_node(site: &Site, nodes: &[Node]) {
    let [a, b, c] = nodes else { unreachable!() };
    for path in ["/p1", "/ban/1", "/tagged1"] {
        for n in nodes {
            expect(&n.get(path).await, path, 1, n.name);
        }
        site.bump(path);
    }
    let r = b.purge("/p1", &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("confirmed by a, c"), "{}", r.text());
    for n in nodes {
        expect(&n.get("/p1").await, "/p1", 2, n.name);
    }

    let r = request(c.admin(), "POST", "/ban", &[], b"req.url ~ ^/ban/").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["fleet"]["sent"], true, "{v}");
    assert_eq!(
        v["fleet"]["pending"].as_array().map(Vec::len),
        Some(0),
        "{v}"
    );
    assert_eq!(
        v["fleet"]["confirmed"],
        serde_json::json!(["a", "b"]),
        "{v}"
    );
    for n in nodes {
        expect(&n.get("/ban/1").await, "/ban/1", 2, n.name);
    }

    let r = a.purge("/", &[("surrogate-key", "group-7")]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("confirmed by b, c"), "{}", r.text());
    for n in nodes {
        expect(&n.get("/tagged1").await, "/tagged1", 2, n.name);
    }
    assert!(b.stat("fleet_inval_applied").await >= 2);

    // A successful unsafe request invalidates its URL (RFC 9111 §4.4) fleet-wide: the shared
    // copy before the answer (this node's next miss must not find it), the others after.
    for n in nodes {
        expect(&n.get("/post1").await, "/post1", 1, n.name);
    }
    site.bump("/post1");
    let r = request(a.addr(), "POST", "/post1", &[], b"x").await;
    assert_eq!(r.status, 200);
    expect(&a.get("/post1").await, "/post1", 2, "a");
    for n in [b, c] {
        let seen = eventually(Duration::from_secs(5), || async {
            n.get("/post1").await.text() == "/post1 v2"
        })
        .await;
        assert!(seen, "{} dropped /post1 after the POST through a", n.name);
    }
}

/// A fill that started before a purge and ends after it stores nothing, here or shared.
pub(super) async fn a_purge_racing_a_fill_wins(site: &Site, nodes: &[Node], cluster: &Cluster) {
    let [a, b, _] = nodes else { unreachable!() };
    let addr = a.addr();
    let slow = tokio::spawn(async move { get(addr, "/race").await });
    // The fill is under way (the origin holds v1 for 1.5 s).
    wait_until(Duration::from_secs(5), || {
        site.origin.count_path("/race") == 1
    })
    .await;
    site.bump("/race");
    let r = b.purge("/race", &[]).await;
    assert!(r.text().contains("confirmed by"), "{}", r.text());
    let old = slow.await.unwrap();
    expect(&old, "/race", 1, "a (asked before the purge)");
    for n in nodes {
        expect(&n.get("/race").await, "/race", 2, n.name);
    }

    // Above, a applied the purge while it was fetching and never offered its copy. The
    // shared tier's own guard, alone: the URL's purge mark set in Redis directly (the PURGE
    // script, as a purge a does not hear of in time leaves it) while a fetches; a's commit,
    // from a fetch that started before the mark, is refused.
    let addr = a.addr();
    let slow = tokio::spawn(async move { get(addr, "/race-mark").await });
    wait_until(Duration::from_secs(5), || {
        site.origin.count_path("/race-mark") == 1
    })
    .await;
    let keys = UrlKeys::new(PREFIX, &CacheKey::new("test.example", "/race-mark"));
    let (index, base) = (
        String::from_utf8(keys.index()).unwrap(),
        String::from_utf8(keys.base()).unwrap(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let refused = a.stat("shared_write_purged").await;
    let master = &cluster.nodes[cluster.master_of(&index)];
    let purge = master.cli(&[
        "EVAL",
        shellac::cache::shared::scripts::PURGE.source,
        "1",
        &index,
        &base,
        &format!("{now}-0"),
        "600000",
    ]);
    assert_eq!(purge.trim(), "0", "nothing stored yet: {purge}");
    site.race_gate.notify_one();
    expect(&slow.await.unwrap(), "/race-mark", 1, "a");
    let was_refused = eventually(Duration::from_secs(5), || async {
        a.stat("shared_write_purged").await > refused
    })
    .await;
    assert!(was_refused, "a's commit refused by the purge mark");
    let r = b.get("/race-mark").await;
    expect(&r, "/race-mark", 1, "b");
    assert!(
        !r.cache_status().contains("detail=shared"),
        "{}",
        r.cache_status()
    );
    assert_eq!(site.origin.count_path("/race-mark"), 2);
}

/// A soft purge marks the shared copy stale instead of removing it (issue 22): a node that
/// never had the URL serves the old copy within grace while one refresh fetches the new one,
/// as a single node's soft purge does.
pub(super) async fn a_soft_purge_leaves_the_shared_copy_stale(site: &Site, nodes: &[Node]) {
    let [a, b, c] = nodes else { unreachable!() };
    let writes = a.stat("shared_write").await;
    expect(&a.get("/soft1").await, "/soft1", 1, "a");
    written(a, writes, 1).await;
    let r = b.get("/soft1").await;
    expect(&r, "/soft1", 1, "b");
    assert!(
        r.cache_status().contains("detail=shared"),
        "{}",
        r.cache_status()
    );
    site.bump("/soft1");
    let r = b.purge("/soft1", &[("soft-purge", "1")]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("confirmed by a, c"), "{}", r.text());
    // c never had it: the shared copy, stale now, is served in grace (not a miss).
    let r = c.get("/soft1").await;
    expect(&r, "/soft1", 1, "c (grace)");
    assert!(
        r.cache_status().contains("stale-while-revalidate"),
        "{}",
        r.cache_status()
    );
    // The refresh brings v2 to every node; the fleet asked the origin for it at most once
    // per node (each node's local copy is refreshed by that node).
    for n in nodes {
        let mut v2 = false;
        for _ in 0..100 {
            if n.get("/soft1").await.text() == "/soft1 v2" {
                v2 = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(v2, "{}: never refreshed after the soft purge", n.name);
    }
    assert!(site.origin.count_path("/soft1") <= 4);
}

/// A slot moves to another master while nodes read it: ASK during the move, MOVED after.
pub(super) async fn resharding_is_followed(site: &Site, nodes: &[Node], cluster: &Cluster) {
    let [a, b, c] = nodes else { unreachable!() };
    let writes = a.stat("shared_write").await;
    expect(&a.get("/moved").await, "/moved", 1, "a");
    written(a, writes, 1).await;
    // The test client's Host.
    let keys = UrlKeys::new(PREFIX, &CacheKey::new("test.example", "/moved"));
    let index = String::from_utf8(keys.index()).unwrap();
    let slot: u16 = cluster.nodes[0]
        .cli(&["CLUSTER", "KEYSLOT", &index])
        .trim()
        .parse()
        .unwrap();
    let from = cluster.master_of_slot(slot);
    let to = (0..cluster.nodes.len())
        .find(|i| *i != from && cluster.master_of_slot_is(*i))
        .expect("another master");
    let (src, dst) = (&cluster.nodes[from], &cluster.nodes[to]);
    let slot_s = slot.to_string();
    let (src_id, dst_id) = (cluster.id(from), cluster.id(to));
    assert!(
        dst.cli(&["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &src_id])
            .contains("OK")
    );
    assert!(
        src.cli(&["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &dst_id])
            .contains("OK")
    );
    let in_slot = src.cli(&["CLUSTER", "GETKEYSINSLOT", &slot_s, "1000"]);
    let moving: Vec<&str> = in_slot.lines().filter(|l| !l.is_empty()).collect();
    assert!(!moving.is_empty(), "the object's keys are in the slot");
    let mut args = vec!["MIGRATE", "127.0.0.1"];
    let port = dst.port.to_string();
    args.extend([port.as_str(), "", "0", "5000", "KEYS"]);
    args.extend(moving.iter().copied());
    assert!(src.cli(&args).contains("OK"), "migrate");
    // Keys moved, slot not yet: the source answers ASK for them.
    let r = b.get("/moved").await;
    expect(&r, "/moved", 1, "b during the migration");
    assert!(
        r.cache_status().contains("detail=shared"),
        "{}: {:?} errors {} timeouts {} refused {} skipped {}",
        r.cache_status(),
        b.served()
            .log
            .try_iter()
            .filter(|l| l.contains("shared"))
            .collect::<Vec<_>>(),
        b.stat("shared_error").await,
        b.stat("shared_timeout").await,
        b.stat("shared_refused").await,
        b.stat("shared_skipped").await
    );
    // A purge while the slot moves: its script follows ASK to the importing master.
    site.bump("/moved");
    let r = a.purge("/moved", &[]).await;
    assert!(
        r.text().contains("shared tier: 1 removed") && r.text().contains("confirmed by b, c"),
        "{}",
        r.text()
    );
    for n in nodes {
        expect(&n.get("/moved").await, "/moved", 2, n.name);
    }
    for n in &cluster.nodes {
        if cluster.is_master(n.port) {
            n.cli(&["CLUSTER", "SETSLOT", &slot_s, "NODE", &dst_id]);
        }
    }
    cluster.wait_ok(Duration::from_secs(10));
    // After the move (MOVED): a write by one node, a shared hit on another, a purge.
    site.bump("/moved");
    let r = a.purge("/moved", &[]).await;
    assert!(r.text().contains("confirmed by b, c"), "{}", r.text());
    let writes = a.stat("shared_write").await;
    expect(&a.get("/moved").await, "/moved", 3, "a after the move");
    written(a, writes, 1).await;
    let shared_hit = eventually(Duration::from_secs(5), || async {
        let r = c.get("/moved").await;
        r.text() == "/moved v3" && r.cache_status().contains("detail=shared")
    })
    .await;
    assert!(shared_hit, "c reads a's copy from the slot's new master");
    assert_eq!(site.origin.count_path("/moved"), 3);
}
