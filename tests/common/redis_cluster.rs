//! A real Redis Cluster on loopback for the fleet tests: 3 masters and 3 replicas of Debian's
//! `redis-server` (or, [`Cluster::start_tls`], 3 masters speaking only TLS), each in a
//! temporary directory on an ephemeral port, joined with `redis-cli --cluster create`. Every
//! process is stopped by its PID when the cluster is dropped (also when a test panics). One
//! cluster per test binary: it takes a few seconds.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TempDir;
use super::tools;

/// One `redis-server` of the cluster.
pub struct Node {
    pub port: u16,
    child: Option<Child>,
    dir: std::path::PathBuf,
    /// What `redis-cli` needs to reach it (`--tls` and its files for a TLS cluster).
    cli_args: Vec<String>,
}

/// A TLS cluster's files: the CA its nodes and clients must chain to, and the nodes'
/// certificate and key (also presented by `redis-cli` as its client certificate).
pub struct TlsFiles {
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

impl Node {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn start(port: u16, dir: std::path::PathBuf, extra: &[String], cli_args: &[String]) -> Node {
        std::fs::create_dir_all(&dir).expect("node dir");
        let port_args = if cli_args.is_empty() {
            vec!["--port".to_string(), port.to_string()]
        } else {
            ["--port", "0", "--tls-port", &port.to_string()]
                .map(String::from)
                .to_vec()
        };
        let child = Command::new("redis-server")
            .current_dir(&dir)
            .args(&port_args)
            .args([
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                // Failover within about two seconds of a master's death.
                "--cluster-node-timeout",
                "1000",
                "--appendonly",
                "no",
                "--save",
                "",
                "--daemonize",
                "no",
                "--logfile",
                "redis.log",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        Node {
            port,
            child: Some(child),
            dir,
            cli_args: cli_args.to_vec(),
        }
    }

    /// SIGKILL (a crashed master), and waits for it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends a signal by PID (`-STOP`, `-CONT`).
    pub fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
        }
    }

    /// `redis-cli -p PORT ARGS`, its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = self.cli_args.iter().map(String::as_str).collect();
        all.extend(args);
        cli(self.port, &all)
    }

    /// The node's log (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `redis-cli -p PORT ARGS` (bounded by `timeout 10`), stdout.
pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .arg("10")
        .arg("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How many times `redis-cli --cluster create` is run before the cluster is given up on.
const CREATE_TRIES: usize = 3;

/// Whether `redis-cli --cluster create` said it assigned the slots and joined the nodes: its
/// final check passed, or it got as far as sending the MEETs (what follows is the cluster's
/// gossip, which [`Cluster::joined`] waits for).
pub fn created(out: &str) -> bool {
    out.contains("[OK] All 16384 slots covered") || out.contains("Sending CLUSTER MEET messages")
}

/// The running cluster.
pub struct Cluster {
    pub nodes: Vec<Node>,
    _dir: TempDir,
}

/// A free port whose cluster bus port (+10000) is free too.
fn free_port(taken: &[u16]) -> u16 {
    for _ in 0..200 {
        let Ok(l) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(addr) = l.local_addr() else { continue };
        let p = addr.port();
        if !(1024..=55_000).contains(&p) || taken.contains(&p) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair for redis");
}

impl Cluster {
    /// Starts the cluster, or None (skipped) when `redis-server` / `redis-cli` are missing
    /// and `SHELLAC_REQUIRE_TOOLS` is not set.
    pub fn start() -> Option<Cluster> {
        Cluster::start_with(6, 1, &[], &[])
    }

    /// A cluster of 3 masters (no replicas) that speaks only TLS — between its nodes too —
    /// with `files`, requires client certificates (`tls-auth-clients yes`), and runs with the
    /// server arguments `extra` (ACL users...). None when skipped, as [`Cluster::start`].
    pub fn start_tls(files: &TlsFiles, extra: &[String]) -> Option<Cluster> {
        let file = |p: &std::path::Path| p.display().to_string();
        let (ca, cert, key) = (file(&files.ca), file(&files.cert), file(&files.key));
        let mut server: Vec<String> = [
            "--tls-cluster",
            "yes",
            "--tls-replication",
            "yes",
            "--tls-auth-clients",
            "yes",
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
        ]
        .map(String::from)
        .to_vec();
        server.extend(extra.iter().cloned());
        let cli = ["--tls", "--cacert", &ca, "--cert", &cert, "--key", &key].map(String::from);
        Cluster::start_with(3, 0, &server, &cli)
    }

    fn start_with(
        count: usize,
        replicas: usize,
        server: &[String],
        cli_args: &[String],
    ) -> Option<Cluster> {
        let have = |tool: &str| {
            Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        tools::require(
            have("redis-server").then_some(()),
            "redis-server",
            "redis-server",
        )?;
        tools::require(have("redis-cli").then_some(()), "redis-cli", "redis-tools")?;
        let dir = TempDir::new("redis-cluster");
        let mut ports = Vec::new();
        for _ in 0..count {
            let p = free_port(&ports);
            ports.push(p);
        }
        let nodes: Vec<Node> = ports
            .iter()
            .map(|p| Node::start(*p, dir.path(&format!("n{p}")), server, cli_args))
            .collect();
        for n in &nodes {
            wait_for(Duration::from_secs(10), || {
                n.cli(&["PING"]).contains("PONG")
            })
            .unwrap_or_else(|| panic!("redis-server on {} did not start: {}", n.port, n.log()));
        }
        let cluster = Cluster { nodes, _dir: dir };
        cluster.create(replicas, cli_args);
        Some(cluster)
    }

    /// Joins the nodes into one cluster with `redis-cli --cluster create`, at most
    /// [`CREATE_TRIES`] times. The command's own last step checks the slots from one node's
    /// view, and on a loaded machine it can run before gossip has told that node of the other
    /// masters: "[ERR] Not all 16384 slots are covered" (seen once at load ~16) although every
    /// slot was assigned and the cluster converges a moment later. So once the command has
    /// assigned the slots and sent the MEETs, the cluster itself decides ([`Cluster::joined`],
    /// up to 20 s); a try that got no further, or did not converge, resets every node (FLUSHALL,
    /// CLUSTER RESET HARD) and runs the command again.
    fn create(&self, replicas: usize, cli_args: &[String]) {
        let mut args: Vec<String> = cli_args.to_vec();
        args.extend(["--cluster".into(), "create".into()]);
        args.extend(self.nodes.iter().map(Node::addr));
        args.extend(["--cluster-replicas".into(), replicas.to_string()]);
        args.push("--cluster-yes".into());
        let mut said = Vec::new();
        for _ in 0..CREATE_TRIES {
            let out = Command::new("timeout")
                .arg("30")
                .arg("redis-cli")
                .args(&args)
                .output()
                .expect("redis-cli --cluster create");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if created(&text) && self.joined(Duration::from_secs(20)) {
                return;
            }
            said.push(text);
            for n in &self.nodes {
                n.cli(&["FLUSHALL"]);
                n.cli(&["CLUSTER", "RESET", "HARD"]);
            }
        }
        panic!(
            "cluster create failed {CREATE_TRIES} times:\n{}",
            said.join("\n---\n")
        );
    }

    /// Whether every node, within `limit`, knows all the others and says the cluster is ok
    /// with every slot served.
    fn joined(&self, limit: Duration) -> bool {
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        wait_for(limit, || {
            self.nodes.iter().all(|n| {
                let info = n.cli(&["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && info.lines().any(|l| l.trim() == known)
            })
        })
        .is_some()
    }

    /// The seed list for `storage.shared.nodes`.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(Node::addr).collect()
    }

    /// Waits until every running node says `cluster_state:ok` and sees every slot served.
    pub fn wait_ok(&self, limit: Duration) {
        let ok = wait_for(limit, || {
            self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                let info = n.cli(&["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
            })
        });
        assert!(ok.is_some(), "cluster not ok in {limit:?}");
    }

    /// The index of the master serving `key`'s slot.
    pub fn master_of(&self, key: &str) -> usize {
        let slot = self.nodes[0].cli(&["CLUSTER", "KEYSLOT", key]);
        let slot: u16 = slot.trim().parse().expect("keyslot");
        self.master_of_slot(slot)
    }

    /// The index of the master serving `slot` (as the first running node sees it).
    pub fn master_of_slot(&self, slot: u16) -> usize {
        let alive = self
            .nodes
            .iter()
            .find(|n| n.child.is_some())
            .expect("a node");
        // CLUSTER NODES: "id addr flags master ping pong epoch state slot-ranges...".
        let nodes = alive.cli(&["CLUSTER", "NODES"]);
        for line in nodes.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 9 || !f[2].contains("master") || f[2].contains("fail") {
                continue;
            }
            for range in &f[8..] {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>())
                    && (a..=b).contains(&slot)
                {
                    let port: u16 = f[1]
                        .split(['@', ':'])
                        .nth(1)
                        .and_then(|p| p.parse().ok())
                        .expect("node port");
                    return self
                        .nodes
                        .iter()
                        .position(|n| n.port == port)
                        .expect("known node");
                }
            }
        }
        panic!("no master for slot {slot}: {nodes}");
    }

    /// Whether the node on `port` is a running master.
    pub fn is_master(&self, port: u16) -> bool {
        let Some(alive) = self.nodes.iter().find(|n| n.child.is_some()) else {
            return false;
        };
        alive.cli(&["CLUSTER", "NODES"]).lines().any(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() >= 3
                && f[1].starts_with(&format!("127.0.0.1:{port}@"))
                && f[2].contains("master")
                && !f[2].contains("fail")
        })
    }

    /// Whether node `i` is a running master.
    pub fn master_of_slot_is(&self, i: usize) -> bool {
        self.nodes[i].child.is_some() && self.is_master(self.nodes[i].port)
    }

    /// The cluster id of node `i`.
    pub fn id(&self, i: usize) -> String {
        self.nodes[i].cli(&["CLUSTER", "MYID"]).trim().to_string()
    }

    /// Stops every node (Redis gone entirely).
    pub fn stop_all(&mut self) {
        for n in &mut self.nodes {
            n.kill9();
        }
    }
}

/// Polls `f` every 50 ms until it is true or `limit` passed.
pub fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> Option<()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return Some(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}
