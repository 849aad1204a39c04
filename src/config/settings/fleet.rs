//! `[storage.shared]`: the tier a fleet of nodes shares on Redis Cluster, and the broadcast of
//! invalidations between them (`cache/shared`, docs/fleet.md).

use std::time::Duration;

use super::setting::{Default, Kind, Setting};

pub(super) const SHARED: &[Setting] = &[
    Setting {
        section: "storage",
        key: "shared",
        kind: Kind::Table {
            section: "storage.shared",
        },
        default: Default::Unset(r##"none: no fleet"##),
        example: r##"{ nodes = ["10.0.0.5:7000", "10.0.0.6:7000"] }"##,
        restart: true,
        doc: r##"The tier shared by a fleet of Shellac nodes, on a Redis Cluster, below the memory and disk tiers: the table below (how-to: docs/fleet.md). A local miss asks it before the origin; an object one node fetched is written there once, in the background, and every node can serve it; one node fetches a missing URL for the whole fleet while the others wait for its copy; PURGE, soft purge, bans and tag purges sent to any node apply on every node. Redis slow, failing over or gone never makes a client see an error, and costs a request at most `read_timeout` per operation it waits for (then nothing while the circuit breaker is open): the node works as a single Shellac until Redis answers again."##,
    },
    Setting {
        section: "storage.shared",
        key: "nodes",
        kind: Kind::Texts("a list of Redis Cluster nodes such as [\"10.0.0.5:7000\"]"),
        default: Default::Required,
        example: r##"["10.0.0.5:7000", "10.0.0.6:7000", "10.0.0.7:7000"]"##,
        restart: true,
        doc: r##"Seed nodes of the Redis Cluster, `host:port`; the client learns the others (and every resharding and failover) from them. Give several: one is enough to connect while it is up."##,
    },
    Setting {
        section: "storage.shared",
        key: "username",
        kind: Kind::Text("a user name"),
        default: Default::Unset(r##"none: the default user"##),
        example: r##""shellac""##,
        restart: true,
        doc: r##"The ACL user Shellac authenticates as (Redis 6 or later), with `password`. It needs every key and sharded channel under `key_prefix` and the commands of the categories it uses; docs/fleet.md has the `ACL SETUSER` line. The user must exist on every node of the cluster (ACLs are not replicated)."##,
    },
    Setting {
        section: "storage.shared",
        key: "password",
        kind: Kind::Text("a password"),
        default: Default::Unset(r##"none"##),
        example: r##""s3cret""##,
        restart: true,
        doc: r##"The password of `username`, or without one of the default user (`requirepass`). Sent at every connection: in clear unless `tls` is on."##,
    },
    Setting {
        section: "storage.shared",
        key: "tls",
        kind: Kind::Table {
            section: "storage.shared.tls",
        },
        default: Default::Unset(r##"none (cleartext)"##),
        example: r##"{ ca = "/etc/shellac/redis-ca.pem" }"##,
        restart: true,
        doc: r##"TLS to every node of the cluster (Redis started with `tls-port`, `port 0` and `tls-cluster yes`): `tls = {}` for the defaults (each node's certificate verified against the system's trust store for the address the cluster announces for it), or a table of the keys below. The seeds in `nodes` are then TLS ports. The files are read and checked by `shellac check` and at start (and again at each connection attempt until the first succeeds), then every 5 s for changes: renewed files are used by a new connection, without a restart (files that do not load or that the cluster refuses are logged, and the current connection kept). A failed handshake is never a client error: it is logged, counted (`shared_connect_error`, or `shared_error` once connected) and the node serves without the shared tier, as when Redis is unreachable."##,
    },
    Setting {
        section: "storage.shared",
        key: "key_prefix",
        kind: Kind::Text("a key prefix"),
        default: Default::Value(r##""shellac:""##),
        example: r##""##,
        restart: true,
        doc: r##"Prefix of every key Shellac writes: two fleets (or a staging fleet) can share one cluster with different prefixes. Every node of a fleet must use the same one."##,
    },
    Setting {
        section: "storage.shared",
        key: "node_name",
        kind: Kind::Text("a node name"),
        default: Default::Unset(r##"the host name and the first listen port"##),
        example: r##""edge-3""##,
        restart: true,
        doc: r##"This node's name in the fleet: its position in the invalidation log and its heartbeat are kept under it (`GET /fleet`, the lag per node). Stable across restarts, distinct per node."##,
    },
    Setting {
        section: "storage.shared",
        key: "max_object_size",
        kind: Kind::Size {
            min: 1 << 10,
            max: 64 << 20,
        },
        default: Default::Value(r##""1MiB""##),
        example: r##""##,
        restart: true,
        doc: r##"Largest object written to the shared tier; larger ones (and bodies kept on disk) stay in the node's local tiers (counter `shared_write_skip`). Bodies over 256 KiB are stored as 256 KiB chunks and read back in one round trip."##,
    },
    Setting {
        section: "storage.shared",
        key: "connect_timeout",
        kind: Kind::Duration {
            min: Duration::from_millis(1),
        },
        default: Default::Value(r##""1s""##),
        example: r##""##,
        restart: true,
        doc: r##"Deadline of a connection to a cluster node. Until the first connection succeeds (retried every `breaker_cooldown`) the node serves without the shared tier; start-up waits at most twice this for the fleet's invalidation log (a node restarted with a disk tier catches up before it serves), then serves."##,
    },
    Setting {
        section: "storage.shared",
        key: "read_timeout",
        kind: Kind::Duration {
            min: Duration::from_millis(1),
        },
        default: Default::Value(r##""50ms""##),
        example: r##""##,
        restart: true,
        doc: r##"Deadline of each operation a client request waits for: the lookup (and lease), and for a body over 256 KiB the read of its chunks; a URL with `Vary` is looked up twice (its variants, then the request's). A local miss waits for Redis at most this per operation — plus, while another node fetches the URL, up to `lease_timeout` for its copy. Past it the request goes to the origin (counter `shared_timeout`)."##,
    },
    Setting {
        section: "storage.shared",
        key: "write_timeout",
        kind: Kind::Duration {
            min: Duration::from_millis(1),
        },
        default: Default::Value(r##""500ms""##),
        example: r##""##,
        restart: true,
        doc: r##"Deadline of each background operation: writes, invalidations, reading the invalidation log."##,
    },
    Setting {
        section: "storage.shared",
        key: "lease_timeout",
        kind: Kind::Duration {
            min: Duration::from_millis(1),
        },
        default: Default::Value(r##""1s""##),
        example: r##""##,
        restart: true,
        doc: r##"Fleet coalescing: a node that misses a URL no node has takes a lease on fetching it for this long; the other nodes that miss it wait for its copy in the shared tier at most this long, then fetch themselves (counter `shared_lease_timeout`). A lease holder that dies blocks nobody longer than this."##,
    },
    Setting {
        section: "storage.shared",
        key: "breaker_threshold",
        kind: Kind::Count { min: 1, max: 1000 },
        default: Default::Value(r##"5"##),
        example: r##""##,
        restart: true,
        doc: r##"Failed or late operations in a row that open the circuit breaker: then the shared tier is skipped (counter `shared_skipped`) for `breaker_cooldown`, and one operation probes it (gauge `shared_breaker_state`)."##,
    },
    Setting {
        section: "storage.shared",
        key: "breaker_cooldown",
        kind: Kind::Duration {
            min: Duration::from_millis(1),
        },
        default: Default::Value(r##""1s""##),
        example: r##""##,
        restart: true,
        doc: r##"How long an open circuit breaker skips the shared tier before one probe; also how often a node that could not connect tries again."##,
    },
    Setting {
        section: "storage.shared",
        key: "confirm_timeout",
        kind: Kind::Duration {
            min: Duration::ZERO,
        },
        default: Default::Value(r##""1s""##),
        example: r##""##,
        restart: true,
        doc: r##"How long a PURGE, ban or tag purge waits for every other live node (heartbeat in the last 5 s) to confirm it applied it before answering; the answer names the nodes that did and did not (counter `fleet_inval_unconfirmed`). `"0s"` answers at once."##,
    },
    Setting {
        section: "storage.shared",
        key: "log_length",
        kind: Kind::Count {
            min: 1000,
            max: 100_000_000,
        },
        default: Default::Value(r##"100000"##),
        example: r##""##,
        restart: true,
        doc: r##"Invalidations kept in the fleet's log (a Redis Stream) for nodes that were disconnected or restarted to catch up. A node further behind than that drops its local cache rather than serve something purged (counter `fleet_reset`)."##,
    },
];

pub(super) const SHARED_TLS: &[Setting] = &[
    Setting {
        section: "storage.shared.tls",
        key: "ca",
        kind: Kind::Text("a file path"),
        default: Default::Unset(r##"the system's trust store"##),
        example: r##""/etc/shellac/redis-ca.pem""##,
        restart: true,
        doc: r##"PEM file of the CA certificates the nodes' certificates must chain to (the cluster's own CA, as Redis's `tls-ca-cert-file`). Without it: the operating system's trust store (`/etc/ssl/certs`)."##,
    },
    Setting {
        section: "storage.shared.tls",
        key: "cert",
        kind: Kind::Text("a file path"),
        default: Default::Unset(r##"none"##),
        example: r##""/etc/shellac/redis-client.pem""##,
        restart: true,
        doc: r##"Client certificate chain (PEM) presented to every node, for a cluster that requires one (`tls-auth-clients yes`, the default of a TLS Redis); needs `key`. It must be valid now and chain to the CA the nodes trust."##,
    },
    Setting {
        section: "storage.shared.tls",
        key: "key",
        kind: Kind::Text("a file path"),
        default: Default::Unset(r##"none"##),
        example: r##""/etc/shellac/redis-client.key""##,
        restart: true,
        doc: r##"The client certificate's private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC)."##,
    },
    Setting {
        section: "storage.shared.tls",
        key: "verify_name",
        kind: Kind::Bool,
        default: Default::Value(r##"true"##),
        example: r##""##,
        restart: true,
        doc: r##"Whether each node's certificate must name the address Shellac reaches it at — the address the cluster announces for it: an IP address (checked against the certificate's IP addresses), or a host name with `cluster-preferred-endpoint-type hostname`. `false` checks the chain (against `ca`, which it requires) and the dates, not the name: for certificates that name no node (as Redis's own `gen-test-certs.sh` makes them); then any certificate the CA signed is accepted for any node, so keep that CA for the cluster alone. A warning is logged at start."##,
    },
];
