//! `[storage]`: named storages within the memory tier (`[[storage.named]]`), and the tiers
//! below memory — the disk tier (`[storage.disk]`) and the fleet's shared tier on a Redis
//! Cluster (`[storage.shared]`).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lists;
use super::units::{Dur, Size};

/// `[storage]`: tiers below the memory tier.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// `[storage.disk]`: the persistent disk tier. Default: none (memory only).
    pub disk: Option<DiskConfig>,
    /// `[storage.shared]`: the tier shared by a fleet on Redis Cluster. Default: none.
    pub shared: Option<SharedConfig>,
    /// `[[storage.named]]`: named storages within the memory tier (Varnish's `-s
    /// NAME=malloc,SIZE`), chosen per object by VCL's `beresp.storage` and a rule's
    /// `storage`. Default: none (`s0`, the memory tier itself, and `Transient`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub named: Vec<NamedStorage>,
}

/// `[[storage.named]]` one configuration may declare besides `Transient` (the memory tier
/// keeps an account for each storage name seen since start: `cache/stores.rs`).
pub const MAX_NAMED_STORAGES: usize = 14;

/// `[[storage.named]]`: a part of the memory tier with a name and a size of its own
/// (`cache/stores.rs`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NamedStorage {
    /// The name VCL's `storage.NAME` and a rule's `storage` give. Required; letters, digits,
    /// `_` and `-`, starting with a letter; not `s0`; unique (letter case ignored).
    pub name: String,
    /// The bytes its objects may take in the memory tier. Default: none (bounded by
    /// `cache.memory_size` alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
}

/// `[storage.shared]`: a tier below memory and disk that every node of a fleet shares, on a
/// Redis Cluster, and the broadcast of invalidations between the nodes (`cache/shared`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SharedConfig {
    /// Seed nodes of the cluster, `host:port`. Required, at least one.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub nodes: Vec<String>,
    /// The ACL user (Redis 6+), with `password`. Default: none (the default user).
    #[serde(default)]
    pub username: Option<String>,
    /// The password of `username`, else of the default user (`requirepass`). Default: none.
    #[serde(default)]
    pub password: Option<String>,
    /// TLS to every node of the cluster (`tls = {}` for the defaults). Default: none
    /// (cleartext).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<SharedTls>,
    /// Prefix of every key Shellac writes. Default `shellac:`.
    #[serde(default = "default_key_prefix")]
    pub key_prefix: String,
    /// This node's name among the fleet (invalidation positions, lag). Default: the host
    /// name and the first listen port.
    #[serde(default)]
    pub node_name: Option<String>,
    /// Largest object written to the shared tier; larger ones stay local. Default `1MiB`.
    #[serde(default = "default_shared_max_object")]
    pub max_object_size: Size,
    /// Deadline of a connection to a node. Default `1s`.
    #[serde(default = "default_shared_connect")]
    pub connect_timeout: Dur,
    /// Deadline of each read a request waits for (lookup, lease). Default `50ms`.
    #[serde(default = "default_shared_read")]
    pub read_timeout: Dur,
    /// Deadline of each background write and invalidation. Default `500ms`.
    #[serde(default = "default_shared_write")]
    pub write_timeout: Dur,
    /// How long a node holds the fleet lease on fetching a URL, and the longest another node
    /// waits for it. Default `1s`.
    #[serde(default = "default_shared_lease")]
    pub lease_timeout: Dur,
    /// Failed operations in a row that open the circuit breaker. Default 5.
    #[serde(default = "default_breaker_threshold")]
    pub breaker_threshold: u32,
    /// How long an open breaker skips the shared tier before one probe. Default `1s`.
    #[serde(default = "default_shared_connect")]
    pub breaker_cooldown: Dur,
    /// How long an invalidation waits for every live node to confirm it. Default `1s`.
    #[serde(default = "default_shared_connect")]
    pub confirm_timeout: Dur,
    /// Invalidations kept in the fleet's log (a Redis Stream) for nodes catching up; a node
    /// further behind drops its local tiers. Default 100000.
    #[serde(default = "default_log_length")]
    pub log_length: u64,
}

/// `[storage.shared] tls = { ... }`: how Shellac talks TLS to the cluster's nodes
/// (`cache/shared/tls.rs`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SharedTls {
    /// PEM file of the CA certificates the nodes' certificates must chain to. Default: the
    /// system's trust store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate chain (PEM) for clusters that require one (`tls-auth-clients`),
    /// with `key`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<std::path::PathBuf>,
    /// Whether a node's certificate must name the address it is reached at (as the cluster
    /// announces it). Default true; false checks the chain only.
    #[serde(default = "verify_by_default")]
    pub verify_name: bool,
}

fn verify_by_default() -> bool {
    true
}

fn default_key_prefix() -> String {
    "shellac:".into()
}
fn default_shared_max_object() -> Size {
    Size(1 << 20)
}
fn default_shared_connect() -> Dur {
    Dur(Duration::from_secs(1))
}
fn default_shared_read() -> Dur {
    Dur(Duration::from_millis(50))
}
fn default_shared_write() -> Dur {
    Dur(Duration::from_millis(500))
}
fn default_shared_lease() -> Dur {
    Dur(Duration::from_secs(1))
}
fn default_breaker_threshold() -> u32 {
    5
}
fn default_log_length() -> u64 {
    100_000
}

/// `[storage.disk]`: a persistent disk tier below the memory tier (one preallocated file divided
/// into regions; see `cache/disk`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiskConfig {
    /// The data file (created if missing, preallocated to `size`). Its directory must exist.
    /// Required.
    pub path: PathBuf,
    /// Size of the data file's regions (the file is 2 MiB + 4 KiB larger: superblock and two
    /// ban lists): the bound on the disk tier. Required; 4 to 65536 regions.
    pub size: Size,
    /// Unit of writing and reclaim; the largest object the disk tier holds is a little smaller.
    /// Default `64MiB`; between 1 MiB and 1 GiB, a multiple of 4 KiB.
    #[serde(default = "default_region_size")]
    pub region_size: Size,
    /// Which objects are written to disk. Default `second-request`.
    #[serde(default)]
    pub admission: Admission,
    /// What start-up does when the data file cannot be opened, locked or preallocated.
    /// Default `refuse`.
    #[serde(default)]
    pub on_open_error: OnOpenError,
}

/// `storage.disk.on_open_error`: the operator asked for persistence, so by default a disk
/// tier that cannot be opened stops start-up; running on memory alone is a choice.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum OnOpenError {
    /// `shellac serve` exits with the reason.
    #[default]
    Refuse,
    /// Serve from the memory tier alone (an ERROR is logged, `disk_io_error` counted, and the
    /// start-up line says the disk tier is not running).
    MemoryOnly,
}

/// Disk admission policy.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Admission {
    /// Written when fetched for the second time (recently missed before), or when evicted from
    /// memory after at least one memory hit: one-hit wonders never cost a disk write.
    #[default]
    SecondRequest,
    /// Every stored object is written to disk as well (write-through).
    Always,
}

impl Admission {
    pub fn as_str(self) -> &'static str {
        match self {
            Admission::SecondRequest => "second-request",
            Admission::Always => "always",
        }
    }
}

fn default_region_size() -> Size {
    Size(64 << 20)
}

/// Bytes of each region the disk tier keeps for its own headers: an object on disk may be at most
/// `region_size - DISK_REGION_OVERHEAD` bytes (key, headers and body).
pub const DISK_REGION_OVERHEAD: u64 = 64 * 1024;
