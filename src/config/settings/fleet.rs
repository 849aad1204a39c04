//! `[storage.shared]`: the tier a fleet of nodes shares on Redis Cluster, and the broadcast of
//! invalidations between them (`cache/shared`, docs/fleet.md).

use std::time::Duration;

use super::{Default, Kind, Setting};

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
        doc: r##"The tier shared by a fleet of Shellac nodes, on a Redis Cluster, below the memory and disk tiers: the table below (how-to: docs/fleet.md). A local miss asks it before the origin; an object one node fetched is written there once, in the background, and every node can serve it; one node fetches a missing URL for the whole fleet while the others wait for its copy; PURGE, soft purge, bans and tag purges sent to any node apply on every node. Redis slow, failing over or gone never makes a client wait longer than `read_timeout` or see an error: the node works as a single Shellac until Redis answers again."##,
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
        key: "password",
        kind: Kind::Text("a password"),
        default: Default::Unset(r##"none"##),
        example: r##""s3cret""##,
        restart: true,
        doc: r##"The cluster's password (`requirepass`, the default user). No TLS: run the cluster on a private network (the client's TLS support would bring a second TLS stack into the binary)."##,
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
        doc: r##"Deadline of a connection to a cluster node. Until the first connection succeeds (retried every `breaker_cooldown`) the node serves without the shared tier; start-up never waits for Redis."##,
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
        doc: r##"Deadline of each operation a client request waits for (a lookup and lease, reading an object's chunks): the most Redis can add to a miss. Past it the request goes to the origin (counter `shared_timeout`)."##,
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
