//! The shared tier's unit tests, no Redis needed (one scriptable fake stands for it): the
//! tier against a Redis that hangs or fails (deadlines, the circuit breaker, leases); the
//! invalidation feed against a log in memory (trimmed, lost, begun again); purges and tagged
//! writes when part of the cluster fails. With a real cluster: tests/fleet.rs.

use super::*;
use crate::config::SharedConfig;
use fake::{Fake, cluster_down, found};

mod deadlines;
mod fake;
mod fleet_log;
mod purges;

pub(super) fn config() -> SharedConfig {
    let text = "[storage.shared]\nnodes = [\"127.0.0.1:1\"]\nread_timeout = \"20ms\"\nbreaker_threshold = 3\nbreaker_cooldown = \"1h\"\n[[backend]]\nhost = \"a\"\n";
    crate::config::Config::parse(text, "t.toml")
        .unwrap()
        .storage
        .shared
        .unwrap()
}
