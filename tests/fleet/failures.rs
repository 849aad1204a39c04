//! Redis failing under the fleet: a master killed under load, the whole cluster hanging, a
//! wrong password, every Redis process gone — no client error, deadlines instead of hangs, and
//! the tier used again once Redis is back.

use super::*;

/// A master killed under load: no client error, and the tier works again after failover.
pub(super) async fn a_killed_master_costs_no_client_error(
    site: &Site,
    nodes: &[Node],
    cluster: &mut Cluster,
) {
    let paths: Vec<String> = (0..24).map(|i| format!("/k{i}")).collect();
    for p in &paths {
        expect(&nodes[0].get(p).await, p, 1, "a");
    }
    // b holds the one purged below (its answer is then 200 whatever Redis does).
    expect(&nodes[1].get("/k3").await, "/k3", 1, "b");
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::addr).collect();
    let load = Load::start(&addrs, &refs);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let victim = cluster.master_of_slot(0);
    cluster.nodes[victim].kill9();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A purge during the failover: sent (the nodes it names confirmed it) or queued (this
    // node only, until Redis answers) — either way no node it names serves the old copy.
    site.bump("/k3");
    let r = nodes[1].purge("/k3", &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    load.require("/k3", 2, &acknowledged(&r.text(), &nodes[1], nodes));
    let fresh: Vec<String> = (0..24).map(|i| format!("/f{i}")).collect();
    for p in &fresh {
        // Misses during the failover: served from the origin, never an error.
        expect(&nodes[1].get(p).await, p, 1, "b during failover");
    }
    let (sent, errors, stale) = load.finish().await;
    assert!(sent > 0);
    assert_eq!(errors, 0, "client errors during the failover");
    assert_eq!(stale, 0, "purged object served after the purge's answer");
    cluster.wait_ok(Duration::from_secs(20));
    // Recovered by itself: a new object written by one node is a shared hit on another.
    let recovered = eventually(Duration::from_secs(15), || async {
        let p = format!("/after{}", site.origin.count());
        nodes[0].get(&p).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        nodes[2]
            .get(&p)
            .await
            .cache_status()
            .contains("detail=shared")
    })
    .await;
    assert!(recovered, "the shared tier works again after the failover");
    // The purge reached every node, queued or not.
    for n in nodes {
        let purged = eventually(Duration::from_secs(15), || async {
            n.get("/k3").await.text() == "/k3 v2"
        })
        .await;
        assert!(
            purged,
            "{} applied the purge sent during the failover",
            n.name
        );
    }
}

/// Every Redis process stopped (SIGSTOP: connections open, nothing answers) for a moment: each
/// node's operations end at their deadline, the breaker opens, clients see no error; once
/// the cluster runs again the tier is used again.
///
/// The hang stays below `cluster-node-timeout` (1 s, no failover), so the deadline shown is a
/// node of its own, h, whose `read_timeout` is 100 ms; a, b and c (`READ_TIMEOUT`, longer than
/// the hang) serve the same load meanwhile.
pub(super) async fn a_hanging_cluster_costs_deadlines_not_errors(
    site: &Site,
    nodes: &[Node],
    cluster: &Cluster,
    dir: &TempDir,
) {
    let path = config(dir, "h", site.origin.addr, &cluster.seeds(), false);
    let text = std::fs::read_to_string(&path).unwrap();
    let long = format!("read_timeout = \"{READ_TIMEOUT}\"");
    assert!(text.contains(&long), "{text}");
    std::fs::write(&path, text.replace(&long, "read_timeout = \"100ms\"")).unwrap();
    let mut h = Node::start("h", path);
    // h uses the shared tier before Redis hangs (its breaker, open until its first call
    // succeeds, would skip calls rather than time them out).
    let ready = eventually(Duration::from_secs(15), || async {
        let p = format!("/hready{}", site.origin.count());
        nodes[1].get(&p).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        h.get(&p).await.cache_status().contains("detail=shared")
    })
    .await;
    assert!(ready, "h reads the shared tier");
    let timeouts = h.stat("shared_timeout").await;

    for n in &cluster.nodes {
        n.signal("-STOP");
    }
    let started = Instant::now();
    let mut addrs: Vec<SocketAddr> = nodes.iter().map(Node::addr).collect();
    addrs.push(h.addr());
    let load = Load::start(&addrs, &["/s1", "/hang1", "/hang2", "/hang3", "/p1"]);
    // Below cluster-node-timeout (1 s): no failover, just a cluster that does not answer.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (sent, errors, stale) = load.finish().await;
    for n in &cluster.nodes {
        n.signal("-CONT");
    }
    assert_eq!(stale, 0);
    assert!(sent > 0);
    assert_eq!(errors, 0, "client errors while Redis hung");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        h.stat("shared_timeout").await > timeouts,
        "h's deadlines were hit"
    );
    cluster.wait_ok(Duration::from_secs(20));
    let recovered = eventually(Duration::from_secs(15), || async {
        let p = format!("/unhung{}", site.origin.count());
        nodes[1].get(&p).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        nodes[0]
            .get(&p)
            .await
            .cache_status()
            .contains("detail=shared")
    })
    .await;
    assert!(recovered, "the shared tier works again once Redis answers");
    h.proc.take().unwrap().stop();
}

/// Issue 32: a fleet with a wrong Redis password looked healthy (`check` OK, `serve` started,
/// ~4 WARN lines a second the only sign). A refusal of the credentials is a configuration
/// error: one ERROR line naming the setting to fix (repeats rate-limited), counted in
/// `shared_auth_error`, shown by `GET /fleet` and `shellac stat`; clients are still served.
pub(super) async fn a_wrong_redis_password_is_a_configuration_error(
    site: &Site,
    cluster: &Cluster,
    dir: &TempDir,
) {
    for n in cluster.nodes.iter().filter(|n| n.pid().is_some()) {
        let ok = n.cli(&[
            "ACL",
            "SETUSER",
            "fleet-op",
            "on",
            ">right-pass",
            "~*",
            "&*",
            "+@all",
        ]);
        assert!(ok.contains("OK"), "{ok}");
    }
    let path = config(dir, "w", site.origin.addr, &cluster.seeds(), false);
    let text = std::fs::read_to_string(&path).unwrap();
    // [storage.shared] is the file's last table.
    std::fs::write(
        &path,
        format!("{text}username = \"fleet-op\"\npassword = \"wrong-pass\"\n"),
    )
    .unwrap();
    // The whole log, from its first line (the refusal comes before the listening lines that
    // `Served` reads up to).
    let log_file = dir.path("w.log");
    let mut cmd = std::process::Command::new("bash");
    cmd.args([
        "-c",
        "exec \"$0\" serve --config \"$1\" 2> >(tee \"$2\" >&2)",
        common::binary::BIN,
        path.to_str().unwrap(),
        log_file.to_str().unwrap(),
    ]);
    let node = Node {
        name: "w",
        config: path.clone(),
        proc: Some(Served::start(cmd)),
    };
    let refused = eventually(Duration::from_secs(15), || async {
        node.stat("shared_auth_error").await >= 3
    })
    .await;
    assert!(refused, "the refusals are counted");
    expect(&node.get("/wrongpass").await, "/wrongpass", 1, "w");
    let fleet: serde_json::Value =
        serde_json::from_slice(&get(node.admin(), "/fleet").await.body).unwrap();
    let auth = &fleet["auth_error"];
    assert!(
        auth["fix"]
            .as_str()
            .unwrap()
            .contains("storage.shared.password"),
        "{fleet}"
    );
    assert!(
        auth["error"].as_str().unwrap().contains("WRONGPASS"),
        "{fleet}"
    );
    assert!(auth["count"].as_u64().unwrap() >= 3, "{fleet}");
    let out = std::process::Command::new(common::binary::BIN)
        .args(["stat", "-1", "--admin", &node.admin().to_string()])
        .output()
        .unwrap();
    let stat = String::from_utf8_lossy(&out.stdout);
    assert!(
        stat.starts_with("CONFIGURATION ERROR: the Redis cluster refuses the shared tier")
            && stat.contains("storage.shared.password")
            && !stat.contains('\x1b'),
        "{stat}"
    );
    // One ERROR line for all those refusals, none of the "cannot connect ... yet" warnings.
    let log: Vec<String> = std::fs::read_to_string(&log_file)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let errors: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("refuses the shared tier's credentials"))
        .collect();
    assert_eq!(errors.len(), 1, "{log:#?}");
    assert!(
        errors[0].contains("ERROR") && errors[0].contains("storage.shared.password"),
        "{log:#?}"
    );
    // Nor the Redis client's own warning per node per attempt; an unreachable node (one was
    // killed above) is warned of once, not at every attempt.
    assert!(!log.iter().any(|l| l.contains(" redis::")), "{log:#?}");
    let unreachable = log
        .iter()
        .filter(|l| l.contains("cannot connect to the Redis cluster yet"));
    assert!(unreachable.count() <= 1, "{log:#?}");
    let mut node = node;
    if let Some(p) = node.proc.take() {
        p.stop();
    }
}

/// Every Redis process gone: every node serves as a single Shellac, PURGE still answers.
pub(super) async fn redis_gone_entirely(site: &Site, nodes: &[Node], cluster: &mut Cluster) {
    cluster.stop_all();
    let started = Instant::now();
    for n in nodes {
        expect(&n.get("/s1").await, "/s1", 1, n.name);
        expect(&n.get("/gone1").await, "/gone1", 1, n.name);
    }
    site.bump("/gone1");
    let r = nodes[0].purge("/gone1", &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("queued"), "{}", r.text());
    expect(&nodes[0].get("/gone1").await, "/gone1", 2, "a");
    let load = Load::start(
        &nodes.iter().map(Node::addr).collect::<Vec<_>>(),
        &["/s1", "/gone2", "/gone3"],
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (sent, errors, stale) = load.finish().await;
    assert!(sent > 0);
    assert_eq!(errors, 0);
    assert_eq!(stale, 0);
    assert!(started.elapsed() < Duration::from_secs(20));
    // Open (1), or half-open (2) while its one probe of the dead cluster is under way: a
    // busy machine caught it probing once. Closed (0) would mean it never noticed.
    let state = nodes[0].stat("shared_breaker_state").await;
    assert!(
        state == 1 || state == 2,
        "breaker open or probing, got {state}"
    );
    let metrics = get(nodes[0].admin(), "/metrics").await.text();
    assert!(
        metrics.contains("\nshellac_shared_breaker_state 1\n")
            || metrics.contains("\nshellac_shared_breaker_state 2\n"),
        "{metrics}"
    );
}
