//! A fleet: three real `shellac` processes sharing one real Redis Cluster (3 masters, 3
//! replicas of `redis-server` on loopback, started once for this binary): shared hits across
//! nodes (and the admin API, /metrics, `shellac inspect` / `stat` showing them), a gzip-stored
//! object served from another node to gzip and identity clients, coalescing
//! across the fleet, chunked objects (a missing chunk is a miss) and the size cap (nobody
//! queues behind an object over it), purge / ban / tag broadcast, a purge racing a fill, a
//! soft purge, resharding (a lookup and a purge during ASK, writes after MOVED), a node paused
//! with SIGSTOP, a node restarted (catch-up; and, the log trimmed or lost while it was down,
//! its cache dropped), a master killed with SIGKILL under load, a hanging cluster, and Redis
//! gone entirely. Every scenario asserts that no client saw an error and that nothing purged
//! was served after its purge was answered (by the node it was sent to and the nodes the
//! answer says confirmed it; under load, every answer is checked: `Load::require`).

mod common;
#[path = "fleet/failures.rs"]
mod failures;
#[path = "fleet/restarts.rs"]
mod restarts;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::binary::Served;
use common::redis_cluster::Cluster;
use common::{Origin, Reply, ReplyBody, Resp, TempDir, eventually, get, get_with, request};
use shellac::cache::CacheKey;
use shellac::cache::shared::feed::Position;
use shellac::cache::shared::layout::UrlKeys;

const PREFIX: &str = "t:";

/// The origin: every path answers `PATH vN` (N bumped by the test), cacheable for a minute.
struct Site {
    origin: Origin,
    versions: Arc<Mutex<HashMap<String, u32>>>,
    /// Holds the first `/race-mark` answer's last bytes until the test opens it.
    race_gate: Arc<tokio::sync::Notify>,
}

impl Site {
    async fn start() -> Site {
        let versions: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
        let v = versions.clone();
        let race_gate = Arc::new(tokio::sync::Notify::new());
        let gate = race_gate.clone();
        let gated = std::sync::atomic::AtomicBool::new(false);
        let origin = Origin::start(move |seen| {
            let n = *v.lock().unwrap().get(&seen.path).unwrap_or(&1);
            let body = match seen.path.as_str() {
                "/chunky" => "c".repeat(600 * 1024) + &format!("v{n}"),
                "/big" => "b".repeat(2 << 20),
                p => format!("{p} v{n}"),
            };
            let mut reply = Reply::ok(&body).cc("max-age=60");
            if seen.path.starts_with("/vary") {
                let lang = seen
                    .headers
                    .get("accept-language")
                    .map_or("-", |v| v.to_str().unwrap_or("?"));
                reply = Reply::ok(&format!("{} v{n} {lang}", seen.path))
                    .cc("max-age=60")
                    .header("vary", "accept-language");
            }
            if seen.path.starts_with("/gz") {
                // Compressible (text/html, over compression.min_length): a fill stores it gzip.
                reply = Reply::ok(&gz_page(&seen.path, n))
                    .cc("max-age=60")
                    .header("content-type", "text/html");
            }
            if seen.path.starts_with("/esi/page") {
                reply = Reply::ok(&format!(
                    "<html>{} v{n}: <esi:include src=\"/esi/frag\"/></html>",
                    seen.path
                ))
                .cc("max-age=60")
                .header("content-type", "text/html");
            }
            if seen.path.starts_with("/soft") {
                reply = Reply::ok(&body).cc("max-age=60, stale-while-revalidate=60");
            }
            if seen.path.starts_with("/tagged") {
                reply = reply.header("surrogate-key", "group-7");
            }
            if seen.path == "/race" && n == 1 {
                reply = reply.delay(Duration::from_millis(1500));
            }
            if seen.path == "/bigstall" {
                // Over the cap, its Content-Length says so at once; the body takes a while.
                reply = reply.body(ReplyBody::Stall {
                    first: vec![b's'; 1024],
                    pause: Duration::from_millis(1500),
                    rest: vec![b's'; 2 << 20],
                });
            }
            if seen.path == "/nostore" {
                // Uncacheable, its body slow to come.
                reply = Reply::ok("").cc("no-store").body(ReplyBody::Stall {
                    first: b"/nostore ".to_vec(),
                    pause: Duration::from_millis(1500),
                    rest: format!("v{n}").into_bytes(),
                });
            }
            if seen.path == "/race-mark" && !gated.swap(true, Ordering::Relaxed) {
                // The fill stays under way, whatever the machine's load, until the test has set
                // the purge mark (`a_purge_racing_a_fill_wins`).
                reply = reply.body(ReplyBody::Gated {
                    first: b"/race-mark ".to_vec(),
                    gate: gate.clone(),
                    rest: format!("v{n}").into_bytes(),
                });
            }
            if seen.path.starts_with("/coalesce") {
                reply = reply.delay(Duration::from_millis(700));
            }
            reply
        })
        .await;
        Site {
            origin,
            versions,
            race_gate,
        }
    }

    fn bump(&self, path: &str) {
        *self
            .versions
            .lock()
            .unwrap()
            .entry(path.to_string())
            .or_insert(1) += 1;
    }
}

/// The body of a `/gz…` path: text that compresses well, over 512 bytes.
fn gz_page(path: &str, version: u32) -> String {
    format!("{path} v{version}\n") + &"<p>A line of a page the fleet shares.</p>\n".repeat(40)
}

/// The nodes' Redis deadlines: generous, so that a loaded machine (a debug build, CI's two
/// cores shared with other test binaries) does not turn a slow answer into a miss, a skipped
/// call or an open breaker in scenarios that are not about Redis being slow. The hanging
/// cluster, which is, starts a node of its own with a short `read_timeout`
/// (`failures::a_hanging_cluster_costs_deadlines_not_errors`).
const READ_TIMEOUT: &str = "1s";
const WRITE_TIMEOUT: &str = "2s";

/// One node's config file.
fn config(dir: &TempDir, name: &str, origin: SocketAddr, seeds: &[String], disk: bool) -> PathBuf {
    let seeds: Vec<String> = seeds.iter().map(|s| format!("\"{s}\"")).collect();
    let disk = if disk {
        format!(
            "[storage.disk]\npath = \"{}\"\nsize = \"8MiB\"\nregion_size = \"1MiB\"\nadmission = \"always\"\n",
            dir.path(&format!("{name}.dat")).display()
        )
    } else {
        String::new()
    };
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n\
         [[backend]]\nhost = \"127.0.0.1\"\nport = {}\n\n\
         [[rule]]\nname = \"esi\"\npath = '^/esi/page'\nesi = true\n\n\
         [storage.shared]\nnodes = [{}]\nkey_prefix = \"{PREFIX}\"\nnode_name = \"{name}\"\n\
         confirm_timeout = \"3s\"\nlease_timeout = \"5s\"\nbreaker_cooldown = \"300ms\"\n\
         read_timeout = \"{READ_TIMEOUT}\"\nwrite_timeout = \"{WRITE_TIMEOUT}\"\n\n{disk}",
        origin.port(),
        seeds.join(", ")
    );
    let path = dir.path(&format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

struct Node {
    name: &'static str,
    config: PathBuf,
    proc: Option<Served>,
}

impl Node {
    fn start(name: &'static str, config: PathBuf) -> Node {
        let proc = Some(Served::serve(&["--config", config.to_str().unwrap()]));
        Node { name, config, proc }
    }

    fn served(&self) -> &Served {
        self.proc.as_ref().expect("node running")
    }

    fn addr(&self) -> SocketAddr {
        self.served().proxy
    }

    fn admin(&self) -> SocketAddr {
        self.served().admin
    }

    async fn get(&self, path: &str) -> Resp {
        get(self.addr(), path).await
    }

    async fn stat(&self, name: &str) -> u64 {
        let resp = get(self.admin(), "/stats").await;
        let v: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
        v[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{}: no {name}", self.name))
    }

    async fn purge(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        request(self.addr(), "PURGE", path, headers, b"").await
    }
}

/// Asserts a 200 with `PATH vN`.
fn expect(resp: &Resp, path: &str, version: u32, node: &str) {
    assert_eq!(resp.status, 200, "{node} {path}: {resp:?}");
    assert_eq!(
        resp.text(),
        format!("{path} v{version}"),
        "{node} {path}: {}",
        resp.cache_status()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet() {
    let Some(mut cluster) = Cluster::start() else {
        return;
    };
    let site = Site::start().await;
    let dir = TempDir::new("fleet");
    let seeds = cluster.seeds();
    let mut nodes = vec![
        Node::start("a", config(&dir, "a", site.origin.addr, &seeds, false)),
        Node::start("b", config(&dir, "b", site.origin.addr, &seeds, false)),
        Node::start("c", config(&dir, "c", site.origin.addr, &seeds, true)),
    ];

    shared_hits_across_nodes(&site, &nodes, &cluster).await;
    a_gzip_stored_object_serves_every_client_from_another_node(&site, &nodes).await;
    an_esi_page_is_assembled_from_the_shared_copy_without_parsing(&site, &nodes).await;
    the_fleet_coalesces_misses(&site, &nodes).await;
    chunked_objects_and_the_size_cap(&site, &nodes, &cluster).await;
    purge_ban_and_tags_reach_every_node(&site, &nodes).await;
    a_purge_racing_a_fill_wins(&site, &nodes, &cluster).await;
    a_soft_purge_leaves_the_shared_copy_stale(&site, &nodes).await;
    resharding_is_followed(&site, &nodes, &cluster).await;
    restarts::a_paused_node_catches_up(&site, &nodes).await;
    restarts::a_restarted_node_catches_up(&site, &mut nodes).await;
    restarts::a_restarted_node_the_log_lost_track_of_drops_its_cache(&site, &mut nodes, &cluster)
        .await;
    failures::a_killed_master_costs_no_client_error(&site, &nodes, &mut cluster).await;
    failures::a_hanging_cluster_costs_deadlines_not_errors(&site, &nodes, &cluster, &dir).await;
    failures::a_wrong_redis_password_is_a_configuration_error(&site, &cluster, &dir).await;
    failures::redis_gone_entirely(&site, &nodes, &mut cluster).await;

    for n in &mut nodes {
        if let Some(p) = n.proc.take() {
            p.stop();
        }
    }
}

/// One fetch from the origin serves the fleet: the other nodes read the shared copy.
async fn shared_hits_across_nodes(site: &Site, nodes: &[Node], cluster: &Cluster) {
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
async fn a_gzip_stored_object_serves_every_client_from_another_node(site: &Site, nodes: &[Node]) {
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
async fn an_esi_page_is_assembled_from_the_shared_copy_without_parsing(
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
async fn the_fleet_coalesces_misses(site: &Site, nodes: &[Node]) {
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
async fn chunked_objects_and_the_size_cap(site: &Site, nodes: &[Node], cluster: &Cluster) {
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

/// PURGE, a ban and a tag purge sent to one node: once answered, no node serves the old copy.
async fn purge_ban_and_tags_reach_every_node(site: &Site, nodes: &[Node]) {
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
async fn a_purge_racing_a_fill_wins(site: &Site, nodes: &[Node], cluster: &Cluster) {
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
async fn a_soft_purge_leaves_the_shared_copy_stale(site: &Site, nodes: &[Node]) {
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
async fn resharding_is_followed(site: &Site, nodes: &[Node], cluster: &Cluster) {
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

/// Bounded client load: a few tasks GET paths round-robin until told to stop. An answer
/// `PATH vN` asked of a node after [`Load::require`] set a higher version for that path and
/// node is counted as stale.
struct Load {
    stop: Arc<std::sync::atomic::AtomicBool>,
    floors: Floors,
    tasks: Vec<tokio::task::JoinHandle<(usize, usize, usize)>>,
}

/// (path, node) → the lowest version it may serve from now on.
type Floors = Arc<Mutex<HashMap<(String, SocketAddr), u32>>>;

/// The nodes a purge's answer (sent to `sender`) says will not serve the old copy: the
/// sender, and the nodes it lists as confirmed.
fn acknowledged(answer: &str, sender: &Node, nodes: &[Node]) -> Vec<SocketAddr> {
    let confirmed: Vec<&str> = answer
        .split("; confirmed by ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .map(|list| list.split(';').next().unwrap_or("").split(", ").collect())
        .unwrap_or_default();
    nodes
        .iter()
        .filter(|n| n.name == sender.name || confirmed.contains(&n.name))
        .map(Node::addr)
        .collect()
}

impl Load {
    fn start(addrs: &[SocketAddr], paths: &[&str]) -> Load {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let floors: Floors = Arc::default();
        let counter = Arc::new(AtomicUsize::new(0));
        let paths: Arc<Vec<String>> = Arc::new(paths.iter().map(|p| p.to_string()).collect());
        let tasks = (0..4)
            .map(|_| {
                let (stop, counter, paths, addrs, floors) = (
                    stop.clone(),
                    counter.clone(),
                    paths.clone(),
                    addrs.to_vec(),
                    floors.clone(),
                );
                tokio::spawn(async move {
                    let (mut sent, mut errors, mut stale) = (0, 0, 0);
                    // At most 5,000 requests a task, whatever happens.
                    while !stop.load(Ordering::Relaxed) && sent < 5_000 {
                        let i = counter.fetch_add(1, Ordering::Relaxed);
                        let addr = addrs[i % addrs.len()];
                        let path = &paths[i % paths.len()];
                        // Read before the request is sent: a floor set after it does not
                        // apply to its answer.
                        let floor = floors.lock().unwrap().get(&(path.clone(), addr)).copied();
                        // A failed connection or response panics in `get`: its task's
                        // error counts as a client error.
                        let asked = path.clone();
                        let r = tokio::time::timeout(
                            Duration::from_secs(5),
                            tokio::spawn(async move { get(addr, &asked).await }),
                        )
                        .await;
                        sent += 1;
                        match r {
                            Ok(Ok(r)) if r.status == 200 => {
                                let version = r
                                    .text()
                                    .strip_prefix(&format!("{path} v"))
                                    .and_then(|v| v.parse::<u32>().ok());
                                if let (Some(floor), Some(v)) = (floor, version)
                                    && v < floor
                                {
                                    eprintln!(
                                        "stale: {addr} {path} v{v} after v{floor} was required"
                                    );
                                    stale += 1;
                                }
                            }
                            _ => errors += 1,
                        }
                    }
                    (sent, errors, stale)
                })
            })
            .collect();
        Load {
            stop,
            floors,
            tasks,
        }
    }

    /// From now on `nodes` must answer `path` with version `version` or later.
    fn require(&self, path: &str, version: u32, nodes: &[SocketAddr]) {
        let mut floors = self.floors.lock().unwrap();
        for n in nodes {
            floors.insert((path.to_string(), *n), version);
        }
    }

    /// (requests, client errors, stale answers).
    async fn finish(self) -> (usize, usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = (0, 0, 0);
        for t in self.tasks {
            let (s, e, st) = t.await.unwrap();
            total.0 += s;
            total.1 += e;
            total.2 += st;
        }
        total
    }
}

/// Waits until `node` has committed `n` objects to the shared tier since its `shared_write`
/// was `before`: a fill's copy is written in the background after the client's answer, and
/// another node can find it only once it is committed. On a loaded machine that takes a while;
/// the test's claim is that the other node then reads it, not how soon.
async fn written(node: &Node, before: u64, n: u64) {
    let done = eventually(Duration::from_secs(10), || async {
        node.stat("shared_write").await >= before + n
    })
    .await;
    assert!(
        done,
        "{}: {n} object(s) written to the shared tier",
        node.name
    );
}

async fn wait_until(limit: Duration, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() && start.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
