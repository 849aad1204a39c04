//! Starting the shared tier: the connection in the background, the writer and the feed
//! tasks beside it.

use std::sync::Arc;

use super::breaker::Breaker;
use super::feed::Feed;
use super::remote::{self, Remote};
use super::tier::{SharedTier, WRITE_QUEUE};
use super::{auth, follow, writer};
use crate::config::SharedConfig;
use crate::stats::Counters;

impl SharedTier {
    /// The tier for `config`, connecting in the background (the breaker stays open until the
    /// first connection). Needs a Tokio runtime.
    pub fn start(config: &SharedConfig, node: String, counters: Arc<Counters>) -> Arc<SharedTier> {
        let refusals = Arc::new(auth::Refusals::default());
        let (remote, messages) = remote::RedisRemote::start(
            remote::Options {
                nodes: config.nodes.clone(),
                username: config.username.clone(),
                password: config.password.clone(),
                tls: config.tls.clone(),
                connect_timeout: config.connect_timeout.0,
                response_timeout: config.write_timeout.0,
            },
            config.breaker_cooldown.0,
            counters.clone(),
            refusals.clone(),
        );
        let tier = SharedTier::build(config, node, counters, remote, refusals);
        follow::spawn(tier.clone(), messages);
        tier
    }

    #[cfg(test)]
    pub(super) fn with_remote(
        config: &SharedConfig,
        node: String,
        counters: Arc<Counters>,
        remote: Arc<dyn Remote>,
    ) -> Arc<SharedTier> {
        SharedTier::build(config, node, counters, remote, Arc::default())
    }

    fn build(
        config: &SharedConfig,
        node: String,
        counters: Arc<Counters>,
        remote: Arc<dyn Remote>,
        refusals: Arc<auth::Refusals>,
    ) -> Arc<SharedTier> {
        let (tx, rx) = tokio::sync::mpsc::channel(WRITE_QUEUE);
        let tier = Arc::new(SharedTier {
            remote,
            breaker: Breaker::new(
                config.breaker_threshold,
                config.breaker_cooldown.0.as_millis() as u64,
            ),
            counters,
            prefix: config.key_prefix.clone(),
            feed: Feed::new(&config.key_prefix),
            node,
            max_object: config.max_object_size.0,
            read_timeout: config.read_timeout.0,
            write_timeout: config.write_timeout.0,
            lease_timeout: config.lease_timeout.0,
            confirm_timeout: config.confirm_timeout.0,
            log_length: config.log_length,
            writes: tx,
            refusals,
            username: config.username.clone(),
        });
        tier.breaker.open_now(crate::clock::now_ms());
        tokio::spawn(writer::writer(Arc::downgrade(&tier), rx));
        tier
    }
}
