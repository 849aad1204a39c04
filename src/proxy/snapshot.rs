//! Every counter and gauge of a [`Proxy`] now: for `/stats` and the metrics
//! ([`Proxy::stats`]), and as one sample of the history ([`Proxy::sample`]).

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::state::Proxy;
use crate::history::Sample;

impl Proxy {
    /// Every counter and gauge now, for the history.
    pub fn sample(&self) -> Sample {
        Sample {
            at: Instant::now(),
            values: self.stats().into_iter().map(|(_, v)| v).collect(),
            ttfb: self.counters.ttfb.buckets(),
        }
    }

    /// Counters and gauges as (name, value), for `/stats`; names as `stats::names()`.
    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut out = self.counters.snapshot();
        out.extend(
            self.counters
                .pass_reason
                .snapshot()
                .map(|(_, name, n)| (name, n)),
        );
        let storage = self.cache.storage.stats();
        out.push(("n_object", storage.objects));
        out.push(("n_hit_for_miss", self.cache.hit_for_miss_len() as u64));
        out.push(("n_busy", self.cache.busy.len() as u64));
        out.push(("cache_bytes", storage.bytes));
        out.push(("cache_capacity_bytes", storage.capacity));
        let slabs = crate::cache::slab::stats();
        out.push(("cache_slab_bytes", slabs.chunk_bytes));
        out.push(("cache_slot_bytes", slabs.slot_bytes));
        let disk = self
            .cache
            .storage
            .lower_tiers()
            .into_iter()
            .find(|(name, _)| *name == "disk")
            .map(|(_, s)| s)
            .unwrap_or_default();
        out.push(("n_object_disk", disk.objects));
        out.push(("disk_bytes", disk.bytes));
        out.push(("disk_capacity_bytes", disk.capacity));
        out.push((
            "n_client_conn",
            self.shared.open_conns.load(Ordering::Relaxed),
        ));
        out.push((
            "n_client_conn_released",
            self.shared.released_conns.load(Ordering::Relaxed),
        ));
        out.push((
            "n_client_conn_waiting",
            self.shared.waiting_conns.load(Ordering::Relaxed),
        ));
        out.push(("n_splice_pipe", crate::cache::pages::pipes_lent()));
        out.push(("mp4_moov_bytes", self.shared.moov_held.used()));
        let fleet = self.cache.shared.as_deref();
        out.push((
            "shared_breaker_state",
            fleet.map_or(0, |f| f.breaker.state_code()),
        ));
        out.push((
            "fleet_inval_lag_ms",
            fleet.map_or(0, |f| f.feed.lag_ms.load(Ordering::Relaxed)),
        ));
        out.push((
            "fleet_sync_age_ms",
            fleet.map_or(0, |f| f.feed.sync_age_ms().min(u64::MAX >> 1)),
        ));
        out.push((
            "fleet_inval_outbox",
            fleet.map_or(0, |f| f.feed.queued() as u64),
        ));
        out.push(("uptime_seconds", self.shared.started.elapsed().as_secs()));
        out.push((
            "log_subscribers",
            self.shared.recorder.subscriber_count() as u64,
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Config;
    use crate::stats::Counters;

    #[test]
    fn stats_names_are_declared_in_order() {
        let proxy = Proxy::new(
            Arc::new(Config::embedded_default()),
            crate::vcl::attach::Programs::default(),
            Arc::new(Counters::default()),
        )
        .unwrap();
        let names: Vec<&str> = proxy.stats().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, crate::stats::names());
        proxy
            .shared
            .recorder
            .close(std::time::Duration::from_secs(5));
    }
}
