//! The fleet's log across a node's absence: a node paused (SIGSTOP) or restarted with its disk
//! cache catches up from its position before it serves; one whose position the log no longer
//! continues (trimmed, lost, begun again) drops its local tiers.

use super::*;

/// A node stopped with SIGSTOP: the others keep serving without an error and the purge
/// answer names it as unconfirmed; once continued it catches up before serving the URL.
pub(super) async fn a_paused_node_catches_up(site: &Site, nodes: &[Node]) {
    let [a, b, c] = nodes else { unreachable!() };
    for n in nodes {
        expect(&n.get("/paused").await, "/paused", 1, n.name);
    }
    b.served().signal("-STOP");
    // Every thread of b stopped (state T) before the purge is sent: the answer's claim about b
    // is then about a node that cannot have read the entry. `kill` returning is not enough:
    // the kernel stops a process's threads only once one of them has run to take the signal
    // (the group stop), and on a loaded machine the others run on meanwhile. A run without
    // this wait once had b's feed read the purge and confirm it ("confirmed by b, c", load ~16).
    let stopped = eventually(Duration::from_secs(5), || async {
        all_threads_stopped(b.served().pid())
    })
    .await;
    assert!(stopped, "b's threads stopped after SIGSTOP");
    let load = Load::start(&[a.addr(), c.addr()], &["/s1", "/p1", "/chunky", "/paused"]);
    site.bump("/paused");
    let r = a.purge("/paused", &[]).await;
    assert_eq!(r.status, 200);
    load.require("/paused", 2, &acknowledged(&r.text(), a, nodes));
    // b is among the nodes not confirmed (on a loaded machine c may be listed too, in either
    // order).
    let text = r.text();
    let pending: Vec<&str> = text
        .split("not confirmed in time by ")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .next()
                .unwrap_or("")
                .split(['.', ';'])
                .next()
                .unwrap_or("")
        })
        .map(|list| list.split(", ").map(str::trim).collect())
        .unwrap_or_default();
    assert!(pending.contains(&"b"), "{text}");
    expect(&a.get("/paused").await, "/paused", 2, "a");
    // c at once if the answer says it confirmed; else (a loaded machine) once it reads the log.
    if acknowledged(&text, a, nodes).contains(&c.addr()) {
        expect(
            &c.get("/paused").await,
            "/paused",
            2,
            &format!("c ({text})"),
        );
    } else {
        let applied = eventually(Duration::from_secs(10), || async {
            c.get("/paused").await.text() == "/paused v2"
        })
        .await;
        assert!(applied, "c applied the purge: {text}");
    }
    let (sent, errors, stale) = load.finish().await;
    assert!(sent > 0);
    assert_eq!(errors, 0, "client errors while a node was paused");
    assert_eq!(stale, 0, "purged object served after the purge's answer");
    b.served().signal("-CONT");
    // Caught up (it applies the log in order at once when it runs again).
    let caught_up = eventually(Duration::from_secs(10), || async {
        b.get("/paused").await.text() == "/paused v2"
    })
    .await;
    assert!(caught_up, "b caught up with the purge after SIGCONT");
}

/// A node restarted with its disk cache reads the log from its saved position before it
/// serves: what was purged while it was down is not served.
pub(super) async fn a_restarted_node_catches_up(site: &Site, nodes: &mut [Node]) {
    let c = &mut nodes[2];
    for path in ["/restart", "/restart-keep"] {
        expect(&c.get(path).await, path, 1, "c");
    }
    let config = c.config.clone();
    c.proc.take().unwrap().stop();
    site.bump("/restart");
    // c stopped cleanly and said so: the purge does not wait for it (it reads the log
    // before it serves again).
    let unconfirmed = nodes[0].stat("fleet_inval_unconfirmed").await;
    let r = nodes[0].purge("/restart", &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains("confirmed by b") && r.text().contains("stopped: c"),
        "{}",
        r.text()
    );
    assert_eq!(
        nodes[0].stat("fleet_inval_unconfirmed").await,
        unconfirmed,
        "{}",
        r.text()
    );
    nodes[2] = Node::start("c", config);
    expect(
        &nodes[2].get("/restart").await,
        "/restart",
        2,
        "c after restart",
    );
    assert_eq!(
        nodes[2].stat("fleet_reset").await,
        0,
        "caught up from its position, no reset"
    );
    // What was not purged is served from the disk tier it kept (so the v2 above is the purge
    // applied, not a cache that did not survive the restart).
    let r = nodes[2].get("/restart-keep").await;
    expect(&r, "/restart-keep", 1, "c after restart");
    assert!(
        r.cache_status().contains("detail=disk"),
        "{}",
        r.cache_status()
    );
}

/// Regression (issue 22): a node restarted with its disk cache whose saved position the log
/// no longer continues — the entries after it trimmed (`XTRIM`, or more than `log_length`
/// invalidations), the log lost and begun again by a newer invalidation, or lost — resumed
/// there and served from its disk tier what the missing entries had purged. It must drop its
/// local tiers instead (`fleet_reset`). The nodes that were running and up to date are not
/// reset by a trim; those whose log was lost under them are.
pub(super) async fn a_restarted_node_the_log_lost_track_of_drops_its_cache(
    site: &Site,
    nodes: &mut [Node],
    cluster: &Cluster,
) {
    let stream = format!("{PREFIX}{{fleet}}log");
    let on_master = |args: &[&str]| {
        let master = &cluster.nodes[cluster.master_of(&stream)];
        let mut all = vec![args[0], stream.as_str()];
        all.extend(&args[1..]);
        master.cli(&all)
    };

    // 1. Trimmed while c was down.
    for path in ["/trim1", "/trim-keep"] {
        expect(&nodes[2].get(path).await, path, 1, "c");
    }
    let config = nodes[2].config.clone();
    nodes[2].proc.take().unwrap().stop();
    site.bump("/trim1");
    let r = nodes[0].purge("/trim1", &[]).await;
    assert!(r.text().contains("confirmed by b"), "{}", r.text());
    // a has read its own entry too: the trim below leaves a and b where they are.
    let newest = on_master(&["XREVRANGE", "+", "-", "COUNT", "1"]);
    let newest = Position::parse(newest.lines().next().unwrap_or("").trim())
        .unwrap_or_else(|| panic!("the log's newest entry: {newest:?}"));
    let a_read = eventually(Duration::from_secs(5), || async {
        position(&nodes[0]).await >= newest
    })
    .await;
    assert!(
        a_read,
        "a applied the log up to its own purge {newest}: {}",
        get(nodes[0].admin(), "/fleet").await.text()
    );
    assert!(
        on_master(&["XTRIM", "MAXLEN", "0"])
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
            >= 1
    );
    nodes[2] = Node::start("c", config.clone());
    expect(
        &nodes[2].get("/trim1").await,
        "/trim1",
        2,
        "c after the log was trimmed",
    );
    assert_eq!(nodes[2].stat("fleet_reset").await, 1, "c dropped its cache");
    let r = nodes[2].get("/trim-keep").await;
    expect(&r, "/trim-keep", 1, "c");
    assert!(
        !r.cache_status().contains("detail=disk"),
        "dropped with the rest: {}",
        r.cache_status()
    );
    for n in &nodes[..2] {
        assert_eq!(
            n.stat("fleet_reset").await,
            0,
            "{}: up to date, not reset: {:?}",
            n.name,
            n.served()
                .log
                .try_iter()
                .filter(|l| l.contains("dropping"))
                .collect::<Vec<_>>()
        );
    }

    // 2. The log lost while c was down, and begun again by a newer purge: its ids are past
    // c's position and nothing in it was trimmed.
    expect(&nodes[2].get("/lost1").await, "/lost1", 1, "c");
    nodes[2].proc.take().unwrap().stop();
    site.bump("/lost1");
    let r = nodes[0].purge("/lost1", &[]).await;
    assert!(r.text().contains("fleet: sent"), "{}", r.text());
    on_master(&["DEL"]);
    let r = nodes[0].purge("/lost-other", &[]).await;
    assert!(r.text().contains("fleet: sent"), "{}", r.text());
    nodes[2] = Node::start("c", config.clone());
    expect(
        &nodes[2].get("/lost1").await,
        "/lost1",
        2,
        "c after the log was begun again",
    );
    assert_eq!(nodes[2].stat("fleet_reset").await, 1, "c dropped its cache");
    // a and b were running when their log went: they dropped theirs too.
    for n in &nodes[..2] {
        let reset = eventually(Duration::from_secs(5), || async {
            n.stat("fleet_reset").await >= 1
        })
        .await;
        assert!(reset, "{}: its log was lost under it", n.name);
    }

    // 3. The log lost while c was down, not begun again.
    expect(&nodes[2].get("/lost2").await, "/lost2", 1, "c");
    nodes[2].proc.take().unwrap().stop();
    site.bump("/lost2");
    let r = nodes[0].purge("/lost2", &[]).await;
    assert!(r.text().contains("fleet: sent"), "{}", r.text());
    on_master(&["DEL"]);
    nodes[2] = Node::start("c", config);
    expect(
        &nodes[2].get("/lost2").await,
        "/lost2",
        2,
        "c after the log was lost",
    );
    assert_eq!(nodes[2].stat("fleet_reset").await, 1, "c dropped its cache");
}

/// A node's position in the fleet's log (`GET /fleet`).
pub(super) async fn position(node: &Node) -> Position {
    let resp = get(node.admin(), "/fleet").await;
    let v: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    v["position"]
        .as_str()
        .and_then(Position::parse)
        .unwrap_or_default()
}

/// Whether every thread of process `pid` is stopped (`T` in `/proc/PID/task/TID/stat`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).all(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|stat| {
                // The state follows the command name's closing parenthesis.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s == "T"))
            })
            .unwrap_or(false)
    })
}
