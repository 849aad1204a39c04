//! What the fleet shares: a hit read from another node's copy (the admin API, /metrics,
//! `shellac inspect` and `stat` showing it), a gzip-stored object for every client, an ESI page
//! assembled from shared fragments, misses coalesced across nodes, chunked objects and the size
//! cap.

use super::*;

/// One fetch from the origin serves the fleet: the other nodes read the shared copy.
pub(super) async fn shared_hits_across_nodes(site: &Site, nodes: &[Node], cluster: &Cluster) {
    let [a, b, c] = nodes else { unreachable!() };
    let writes = a.stat("shared_write").await;
    let first = a.get("/s1").await;
    expect(&first, "/s1", 1, "a");
    written(a, writes, 1).await;
    for n in [b, c] {
        let r = n.get("/s1").await;
        expect(&r, "/s1", 1, n.name);
        assert!(
            r.cache_status().contains("detail=shared"),
            "{}: {}",
            n.name,
            r.cache_status()
        );
    }
    assert_eq!(
        site.origin.count_path("/s1"),
        1,
        "one origin request for the fleet"
    );
    // Redis keeps it for its TTL + grace + keep (60 s + 0 + the default keep, 1 h), not 60 s.
    let meta = UrlKeys::new(PREFIX, &CacheKey::new("test.example", "/s1")).meta(0);
    let meta = String::from_utf8(meta).unwrap();
    let pttl: u64 = cluster.nodes[cluster.master_of(&meta)]
        .cli(&["PTTL", &meta])
        .trim()
        .parse()
        .unwrap();
    assert!((3_600_000..=3_660_000).contains(&pttl), "PTTL {pttl}");
    // Then each node has its own copy.
    let again = b.get("/s1").await;
    assert!(again.cache_status().contains("hit") && !again.cache_status().contains("shared"));

    // Vary: the variant index is shared too.
    let fr = [("accept-language", "fr")];
    let de = [("accept-language", "de")];
    let writes = a.stat("shared_write").await;
    let r = get_with(a.addr(), "/vary1", &fr).await;
    assert_eq!(r.text(), "/vary1 v1 fr");
    written(a, writes, 1).await;
    let r = get_with(b.addr(), "/vary1", &fr).await;
    assert_eq!(r.text(), "/vary1 v1 fr");
    assert!(
        r.cache_status().contains("detail=shared"),
        "{}",
        r.cache_status()
    );
    let writes = b.stat("shared_write").await;
    let r = get_with(b.addr(), "/vary1", &de).await;
    assert_eq!(r.text(), "/vary1 v1 de");
    written(b, writes, 1).await;
    let r = get_with(c.addr(), "/vary1", &de).await;
    assert_eq!(r.text(), "/vary1 v1 de");
    assert!(
        r.cache_status().contains("detail=shared"),
        "{}",
        r.cache_status()
    );
    assert_eq!(site.origin.count_path("/vary1"), 2, "one fetch per variant");
    assert!(a.stat("shared_write").await >= 1);
    assert!(b.stat("cache_hit_shared").await >= 2);

    // Observability: the copy in each tier, the fleet's nodes, the Prometheus counters.
    let r = get(b.admin(), "/cache?url=/s1&host=test.example").await;
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["shared"], "reachable", "{v}");
    assert_eq!(
        v["variants"][0]["tiers"],
        serde_json::json!(["memory", "shared"]),
        "{v}"
    );
    let r = get(a.admin(), "/fleet").await;
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["breaker"], "closed", "{v}");
    let names: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b", "c"], "{v}");
    let r = get(a.admin(), "/api/dashboard").await;
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["fleet"]["node"], "a", "{v}");
    assert_eq!(v["fleet"]["breaker"], "closed", "{v}");
    assert!(v["fleet"]["writes"].as_u64() >= Some(1), "{v}");
    let metrics = get(c.admin(), "/metrics").await.text();
    for sample in [
        "\nshellac_cache_hit_shared_total 2\n",
        "\nshellac_shared_hit_total 2\n",
        "\nshellac_shared_breaker_state 0\n",
        "\nshellac_shared_error_total ",
        "\nshellac_shared_write_total ",
        "\nshellac_fleet_inval_lag_ms ",
    ] {
        assert!(metrics.contains(sample), "{sample:?} in {metrics}");
    }
    // The command line: `shellac inspect` lists the shared copy, `shellac stat` the shared
    // tier and every node's lag.
    let (b_admin, a_admin) = (b.admin().to_string(), a.admin().to_string());
    let (inspect, stat) = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| {
            let out = std::process::Command::new(common::binary::BIN)
                .args(args)
                .output()
                .expect("run shellac");
            assert!(out.status.success(), "{args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        (
            run(&["inspect", "http://test.example/s1", "--admin", &b_admin]),
            run(&["stat", "--once", "--admin", &a_admin]),
        )
    })
    .await
    .unwrap();
    assert!(inspect.contains("  shared 200 fresh"), "{inspect}");
    assert!(inspect.contains("  memory 200 fresh"), "{inspect}");
    assert!(
        stat.contains("Shared tier (node a): breaker closed"),
        "{stat}"
    );
    for n in ["b", "c"] {
        assert!(stat.contains(&format!("  node {n} ")), "{stat}");
    }
}

/// The fleet tier stores an encoded representation like any body (issue 29): node a gzips a
/// compressible page once at fetch and shares the gzip; nodes b and c read that copy and
/// serve it as stored to a gzip client and decoded (with the identity's `Content-Length`) to
/// an identity client — the first request on each node a shared hit, whichever client
/// makes it — with one origin request for the fleet.
pub(super) async fn a_gzip_stored_object_serves_every_client_from_another_node(
    site: &Site,
    nodes: &[Node],
) {
    use std::io::Read;
    let [a, b, c] = nodes else { unreachable!() };
    let page = gz_page("/gz1", 1);
    let gunzip = |r: &Resp| {
        let mut out = String::new();
        flate2::read::GzDecoder::new(&r.body[..])
            .read_to_string(&mut out)
            .expect("a gzip body");
        out
    };
    let gzip = [("accept-encoding", "gzip")];
    let writes = a.stat("shared_write").await;
    let first = get_with(a.addr(), "/gz1", &gzip).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.header("content-encoding"), Some("gzip"), "{first:?}");
    assert_eq!(gunzip(&first), page);
    written(a, writes, 1).await;
    // b: a gzip client first, then an identity client; c: the other way round.
    for (node, order) in [(b, [true, false]), (c, [false, true])] {
        for (i, gzip_client) in order.into_iter().enumerate() {
            let r = if gzip_client {
                get_with(node.addr(), "/gz1", &gzip).await
            } else {
                get_with(node.addr(), "/gz1", &[]).await
            };
            let what = format!("{} gzip={gzip_client}", node.name);
            assert_eq!(r.status, 200, "{what}: {r:?}");
            if i == 0 {
                assert!(
                    r.cache_status().contains("detail=shared"),
                    "{what}: {}",
                    r.cache_status()
                );
            } else {
                assert!(
                    r.cache_status().contains("hit"),
                    "{what}: {}",
                    r.cache_status()
                );
            }
            let vary = r.header("vary").unwrap_or_default().to_ascii_lowercase();
            assert!(vary.contains("accept-encoding"), "{what}: {:?}", r.headers);
            if gzip_client {
                assert_eq!(r.header("content-encoding"), Some("gzip"), "{what}");
                assert_eq!(r.body, first.body, "{what}: the bytes node a stored");
            } else {
                assert_eq!(r.header("content-encoding"), None, "{what}");
                assert_eq!(r.text(), page, "{what}");
                let len = page.len().to_string();
                assert_eq!(r.header("content-length"), Some(len.as_str()), "{what}");
            }
        }
    }
    assert_eq!(
        site.origin.count_path("/gz1"),
        1,
        "one origin request for the fleet"
    );
}

/// The fleet tier stores an ESI page with its program like any stored field (issue 29,
/// docs/esi.md "Parsed once"): node a fetches and parses the page; node b reads the shared copy
/// and assembles it (its fragment a shared hit too) without parsing anything, one origin
/// request for the page and one for the fragment across the fleet.
pub(super) async fn an_esi_page_is_assembled_from_the_shared_copy_without_parsing(
    site: &Site,
    nodes: &[Node],
) {
    let [a, b, _] = nodes else { unreachable!() };
    let want = "<html>/esi/page v1: /esi/frag v1</html>";
    let writes = a.stat("shared_write").await;
    let first = a.get("/esi/page").await;
    assert_eq!(
        (first.status, first.text().as_str()),
        (200, want),
        "{first:?}"
    );
    assert_eq!(a.stat("esi_programs").await, 1);
    // The page and its fragment.
    written(a, writes, 2).await;
    let parsed = b.stat("esi_parsed").await;
    let r = b.get("/esi/page").await;
    assert_eq!((r.status, r.text().as_str()), (200, want), "{r:?}");
    assert!(
        r.cache_status().contains("detail=shared"),
        "{}",
        r.cache_status()
    );
    assert_eq!(
        b.stat("esi_parsed").await,
        parsed,
        "a shared hit never parses"
    );
    assert!(b.stat("esi_includes").await >= 1);
    assert_eq!(site.origin.count_path("/esi/page"), 1);
    assert_eq!(site.origin.count_path("/esi/frag"), 1);
}

/// Coalescing across the fleet: the three nodes miss one URL at the same moment; one fetches
/// it (the fleet lease), the others wait for its copy in the shared tier.
///
/// A lookup Redis does not answer within `read_timeout` (`READ_TIMEOUT` here) is a miss
/// without the lease, by design: the node fetches for itself rather
/// than wait. On a busy machine that happened (3 origin requests, 1 run in 2 under load), so
/// a round where some node's shared-tier call failed (`shared_timeout`, `shared_skipped`,
/// `shared_error`, `shared_lease_timeout`) proves nothing and another URL is tried, at most
/// 5; a round where every call was answered must have coalesced.
pub(super) async fn the_fleet_coalesces_misses(site: &Site, nodes: &[Node]) {
    async fn total(nodes: &[Node], names: &[&str]) -> u64 {
        let mut sum = 0;
        for n in nodes {
            for name in names {
                sum += n.stat(name).await;
            }
        }
        sum
    }
    const FAILED: [&str; 4] = [
        "shared_timeout",
        "shared_skipped",
        "shared_error",
        "shared_lease_timeout",
    ];
    let mut coalesced = false;
    for round in 1..=5 {
        let path = format!("/coalesce{round}");
        let failed = total(nodes, &FAILED).await;
        let before = total(nodes, &["cache_hit_shared"]).await;
        let asks: Vec<_> = nodes
            .iter()
            .map(|n| {
                let (addr, path) = (n.addr(), path.clone());
                tokio::spawn(async move { get(addr, &path).await })
            })
            .collect();
        for (ask, n) in asks.into_iter().zip(nodes) {
            expect(&ask.await.unwrap(), &path, 1, n.name);
        }
        let failed = total(nodes, &FAILED).await - failed;
        if failed > 0 {
            eprintln!("{path}: {failed} shared-tier calls failed, the round proves nothing");
            continue;
        }
        assert_eq!(
            site.origin.count_path(&path),
            1,
            "one origin request for three nodes' simultaneous misses"
        );
        let after = total(nodes, &["cache_hit_shared"]).await;
        assert_eq!(after - before, 2, "the other two served the shared copy");
        coalesced = true;
        break;
    }
    assert!(
        coalesced,
        "in 5 rounds a shared-tier call always failed: Redis too slow for read_timeout"
    );

    // An uncacheable answer passes the lease at once: b, missing the URL while a still
    // receives its body, fetches it too instead of waiting for a's fetch to end.
    let [a, b, _] = nodes else { unreachable!() };
    let (leases, waits) = (
        b.stat("shared_lease").await,
        b.stat("shared_lease_timeout").await,
    );
    let addr = a.addr();
    let slow = tokio::spawn(async move { get(addr, "/nostore").await });
    wait_until(Duration::from_secs(5), || {
        site.origin.count_path("/nostore") == 1
    })
    .await;
    assert_eq!(b.get("/nostore").await.text(), "/nostore v1");
    assert_eq!(slow.await.unwrap().text(), "/nostore v1");
    assert_eq!(site.origin.count_path("/nostore"), 2);
    assert_eq!(b.stat("shared_lease").await, leases, "b took no lease");
    assert_eq!(b.stat("shared_lease_timeout").await, waits);
}

/// Bodies over 256 KiB travel as chunks — a chunk gone is a miss, never a short body; bodies
/// over `max_object_size` stay local.
pub(super) async fn chunked_objects_and_the_size_cap(
    site: &Site,
    nodes: &[Node],
    cluster: &Cluster,
) {
    let [a, b, c] = nodes else { unreachable!() };
    let writes = a.stat("shared_write").await;
    let first = a.get("/chunky").await;
    assert_eq!(first.status, 200);
    written(a, writes, 1).await;
    let r = b.get("/chunky").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, first.body, "the chunked body, whole and in order");
    assert!(
        r.cache_status().contains("detail=shared"),
        "{}",
        r.cache_status()
    );
    assert_eq!(site.origin.count_path("/chunky"), 1);

    // One chunk removed behind the metadata's back (evicted under maxmemory, say): c, which
    // never had the object, reads the record, misses the chunk and fetches the whole body.
    let keys = UrlKeys::new(PREFIX, &CacheKey::new("test.example", "/chunky"));
    let index = String::from_utf8(keys.index()).unwrap();
    let master = &cluster.nodes[cluster.master_of(&index)];
    let slot = master
        .cli(&["CLUSTER", "KEYSLOT", &index])
        .trim()
        .to_string();
    let listed = master.cli(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
    let chunk = listed
        .lines()
        .find(|k| k.contains("}c0.") && k.ends_with(".1"))
        .unwrap_or_else(|| panic!("chunk 1 of /chunky among {listed:?}"))
        .to_string();
    assert_eq!(master.cli(&["DEL", &chunk]).trim(), "1");
    let refused = c.stat("shared_refused").await;
    let r = c.get("/chunky").await;
    assert_eq!(r.status, 200);
    assert!(r.body == first.body, "the whole body, from the origin");
    assert!(
        !r.cache_status().contains("detail=shared"),
        "{}",
        r.cache_status()
    );
    assert_eq!(site.origin.count_path("/chunky"), 2);
    assert!(c.stat("shared_refused").await > refused);

    for n in [a, b, c] {
        let r = n.get("/big").await;
        assert_eq!((r.status, r.body.len()), (200, 2 << 20), "{}", n.name);
    }
    assert_eq!(
        site.origin.count_path("/big"),
        3,
        "over the cap: each node fetches its own"
    );
    assert!(a.stat("shared_write_skip").await >= 1);

    // And nobody queues behind one: a node fetching an object its Content-Length puts over the
    // cap passes the fleet lease at once, so b, missing it meanwhile, fetches it too instead of
    // waiting for a's fetch to end and then taking the lease itself.
    let leases = b.stat("shared_lease").await;
    let addr = a.addr();
    let slow = tokio::spawn(async move { get(addr, "/bigstall").await });
    wait_until(Duration::from_secs(5), || {
        site.origin.count_path("/bigstall") == 1
    })
    .await;
    let r = b.get("/bigstall").await;
    assert_eq!((r.status, r.body.len()), (200, 1024 + (2 << 20)), "b");
    let r = slow.await.unwrap();
    assert_eq!((r.status, r.body.len()), (200, 1024 + (2 << 20)), "a");
    assert_eq!(site.origin.count_path("/bigstall"), 2);
    assert_eq!(
        b.stat("shared_lease").await,
        leases,
        "b took no lease: a passed it"
    );
}
