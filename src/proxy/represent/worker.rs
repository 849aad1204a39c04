//! The task that builds queued representations (`represent/mod.rs` queues them): reads the
//! stored body, decodes and encodes it on the blocking pool, and stores the result.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::encode::{encode, fields, gunzip};
use super::job::Job;
use crate::cache::representation;
use crate::cache::{Body, Cache, CacheKey, Object};
use crate::http::accept_encoding::Coding;
use crate::stats::Counters;

/// The task that builds queued representations, one at a time; it ends when its
/// configuration's `Representations` is dropped (a reload).
pub(super) struct Worker {
    pub(super) cache: Arc<Cache>,
    pub(super) counters: Arc<Counters>,
    pub(super) queued: Arc<Mutex<HashSet<CacheKey>>>,
    pub(super) max_identity: u64,
}

impl Worker {
    pub(super) async fn run(self, mut rx: mpsc::Receiver<Job>) {
        while let Some(job) = rx.recv().await {
            let key = job.key.clone();
            self.build(job).await;
            if let Ok(mut queued) = self.queued.lock() {
                queued.remove(&key);
            }
        }
    }

    async fn build(&self, job: Job) {
        let Some(stored) = read_body(&job.source).await else {
            self.counters.compress_encode_dropped.inc();
            return;
        };
        let gzip = representation::stored_gzip(&job.source.headers);
        let (coding, levels, limit) = (job.coding, job.levels, self.max_identity);
        let encoded = tokio::task::spawn_blocking(move || {
            let identity = if gzip {
                gunzip(&stored, limit)?
            } else {
                stored
            };
            if coding == Coding::Identity {
                return gzip.then_some((identity.len() as u64, identity));
            }
            let out = encode(coding, levels, &identity)?;
            Some((identity.len() as u64, out))
        })
        .await;
        let Ok(Some((identity_len, out))) = encoded else {
            self.counters.compress_encode_dropped.inc();
            return;
        };
        if coding == Coding::Identity {
            self.counters.compress_identity.inc();
        } else {
            // Not smaller than the gzip it would replace: not worth a second copy.
            if out.len() as u64 >= job.source.body_len {
                self.counters.compress_encode_dropped.inc();
                return;
            }
            self.counters.compress_encoded_bytes_in.add(identity_len);
            self.counters
                .compress_encoded_bytes_out
                .add(out.len() as u64);
            match coding {
                Coding::Br => self.counters.compress_br.inc(),
                Coding::Zstd => self.counters.compress_zstd.inc(),
                _ => self.counters.compress_gzip.inc(),
            }
        }
        let Some(fields) = fields(&job.source, coding) else {
            return;
        };
        let body_len = out.len() as u64;
        // Stored as any fill's body (`cache/body.rs`): one allocation of exactly its size, from
        // 64 KiB on a mapping of its own, whose pages hits send without a copy
        // (`cache/pages.rs`); a heap vector's would be copied into every client's socket.
        let body = crate::cache::body::store(&[Bytes::from(out)], body_len as usize);
        let object = Object {
            headers: fields,
            body: Body::Memory(body),
            body_len,
            vary: None,
            ..job.source.copy()
        };
        self.cache.store(&job.key, Arc::new(object));
    }
}

/// A stored body, whole (from memory, or read back from the disk tier).
async fn read_body(object: &Arc<Object>) -> Option<Vec<u8>> {
    if let Body::Memory(chunks) = &object.body {
        return Some(chunks.iter().flat_map(|c| c.iter().copied()).collect());
    }
    let mut body = crate::proxy::body::ResponseBody::object(object.clone());
    let mut out = Vec::with_capacity(object.body_len as usize);
    loop {
        use crate::proxy::chunks::Chunks as _;
        match std::future::poll_fn(|cx| body.poll_chunk(cx)).await {
            Some(Ok(chunk)) => out.extend_from_slice(&chunk),
            Some(Err(_)) => return None,
            None => return Some(out),
        }
    }
}
