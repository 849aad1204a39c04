//! The persisted ban list read back at start-up: the newer intact one of its two copies.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::format::{self, BAN_SLOT, BLOCK, BanRecord};
use crate::stats::Counters;

/// The newest intact copy of the ban list: `(generation, bans)`. `None` when neither copy is
/// intact (then no ban can be trusted to be known). A damaged copy is counted in
/// `disk_checksum_fail` and logged.
pub(super) fn read_bans(
    file: &File,
    instance: u64,
    counters: &Counters,
) -> Option<(u64, Vec<BanRecord>)> {
    let mut best: Option<(u64, Vec<BanRecord>)> = None;
    for (copy, at) in [("A", BLOCK), ("B", BLOCK + BAN_SLOT)] {
        let read = || {
            let mut head = vec![0u8; BLOCK as usize];
            file.read_exact_at(&mut head, at).ok()?;
            let mut buf = vec![0u8; format::bans_len(&head)? as usize];
            file.read_exact_at(&mut buf, at).ok()?;
            format::decode_bans(&buf, instance)
        };
        match read() {
            Some((generation, bans)) => {
                if best.as_ref().is_none_or(|(g, _)| generation > *g) {
                    best = Some((generation, bans));
                }
            }
            None => {
                counters.disk_checksum_fail.inc();
                tracing::warn!(
                    copy,
                    "disk cache ban list copy damaged; using the other copy"
                );
            }
        }
    }
    best
}
