//! The shared tier's background writes: queued by the fill (never waited for), run up to
//! [`WRITERS`] at once — chunks first, then the tags, then the commit script.

use std::sync::Arc;
use std::time::Instant;

use super::entry::Position;
use super::layout::{self, UrlKeys};
use super::lookup::Ticket;
use super::scripts;
use super::tier::{SharedTier, Write, rand_u64};
use crate::cache::{CacheKey, Object};

/// Background writes in flight at once.
const WRITERS: usize = 16;

impl SharedTier {
    /// Queues `object` (stored locally under `key`, URL `primary`) to be written to the shared
    /// tier; never waits. `seen`: this node's invalidation position when the fetch started.
    pub fn share(
        &self,
        primary: &CacheKey,
        key: &CacheKey,
        object: &Arc<Object>,
        ticket: Option<Ticket>,
        seen: Position,
    ) {
        if object.body_len > self.max_object
            || !matches!(object.body, crate::cache::Body::Memory(_))
            || object.state.transient()
        {
            self.counters.shared_write_skip.inc();
            return; // Dropping the ticket releases the lease.
        }
        let write = Write {
            primary: primary.clone(),
            key: key.clone(),
            object: object.clone(),
            ticket: ticket.map(Ticket::token),
            seen,
        };
        if self.writes.try_send(write).is_err() {
            self.counters.shared_write_dropped.inc();
        }
    }

    /// Chunks and tags, then the commit. The URL joins its tags' sets before its copy is
    /// committed: a tag purge that finds it there marks the URL purged (`P{h}p`) and the
    /// commit of a fetch that started before is refused; one that comes after the commit
    /// removes the copy. (Regression, issue 22: the tags were added after the commit, and a
    /// tag purge between the two left the committed copy in the shared tier.) A tag that
    /// cannot be added stops the write.
    async fn write(&self, w: Write) {
        let now = Instant::now();
        let Some(ttl) = layout::redis_ttl(&w.object, now) else {
            return;
        };
        let ttl_ms = ttl.as_millis().max(1).to_string().into_bytes();
        let generation = rand_u64();
        let Some(enc) = layout::encode(&w.key, &w.object, generation, now) else {
            return;
        };
        let keys = UrlKeys::new(&self.prefix, &w.primary);
        let v = w.key.variant;
        if !enc.chunks.is_empty() {
            let mut args = vec![ttl_ms.clone()];
            for (n, chunk) in enc.chunks.iter().enumerate() {
                args.push(keys.chunk(v, generation, n as u32));
                args.push(chunk.to_vec());
            }
            let put = self
                .remote
                .eval(&scripts::PUT_CHUNKS, vec![keys.index()], args);
            if self.call(self.write_timeout, put).await.is_none() {
                return;
            }
        }
        let member = layout::tag_member(&w.primary);
        for tag in crate::cache::tags::tags_of(&w.object.headers) {
            let add = self.remote.eval(
                &scripts::TAG_ADD,
                vec![layout::tag_key(&self.prefix, &tag)],
                vec![member.clone(), ttl_ms.clone()],
            );
            if self.call(self.write_timeout, add).await.is_none() {
                return;
            }
        }
        let names: Vec<&str> = w.object.vary().iter().map(|(n, _)| n.as_str()).collect();
        let args = vec![
            enc.meta.to_vec(),
            ttl_ms.clone(),
            format!("{v:x}").into_bytes(),
            format!("{generation:x}").into_bytes(),
            enc.chunks.len().to_string().into_bytes(),
            if names.is_empty() {
                b"-".to_vec()
            } else {
                names.join(",").into_bytes()
            },
            keys.base(),
            w.seen.to_string().into_bytes(),
            w.ticket.unwrap_or_default().into_bytes(),
        ];
        let commit = self.remote.eval(&scripts::COMMIT, vec![keys.index()], args);
        match self
            .call(self.write_timeout, commit)
            .await
            .and_then(|r| r.int())
        {
            Some(1) => self.counters.shared_write.inc(),
            Some(-1) => self.counters.shared_write_purged.inc(),
            Some(_) => self.counters.shared_write_incomplete.inc(),
            None => {}
        }
    }
}

/// Takes queued writes and runs up to [`WRITERS`] at once.
pub(super) async fn writer(
    tier: std::sync::Weak<SharedTier>,
    mut rx: tokio::sync::mpsc::Receiver<Write>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(WRITERS));
    while let Some(w) = rx.recv().await {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(tier) = tier.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            tier.write(w).await;
            drop(permit);
        });
    }
}
