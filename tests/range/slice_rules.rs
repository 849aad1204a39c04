//! Big media in slices under TOML rules (issue 31): each slice fetched is a backend
//! transaction of its own, so the rules' response actions (`ttl`, `set_response_headers`,
//! matchers on the slice's own `Content-Range`) run on every slice, not only on the response
//! that made the URL sliced (`every_slice_fetch_runs_vcl_backend_response` shows the same for
//! VCL).

use super::common::*;
use super::slices::{asked, bytes, origin, probe_then_slices_5_to_7, ranged, sliced};
use shellac::config::Config;
use std::sync::atomic::Ordering;

const MIB: u64 = 1 << 20;

/// The origin says `max-age=0`, so a slice is stored only when a rule's `ttl` ran on it. The
/// first rule gives every slice an hour and a field; the second takes the hour back from
/// slice 6 (`ttl = "0s"`: not stored, sent); the third sets a field on slice 7 only.
const RULES: &str = r#"
[[backend]]
host = "h"

[[rule]]
name = "every-slice"
path = '\.mp4$'
ttl = "1h"
set_response_headers = { "X-Slice-Rule" = "ran" }

[[rule]]
name = "slice-6-uncached"
path = '\.mp4$'
response_header = { "Content-Range" = "^bytes 6291456-" }
ttl = "0s"

[[rule]]
name = "slice-7-marked"
path = '\.mp4$'
response_header = { "Content-Range" = "^bytes 7340032-" }
set_response_headers = { "X-Seventh" = "yes" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_slice_fetch_runs_the_rules_response_actions() {
    const LEN: u64 = 10 * MIB;
    let (origin, file) = origin(LEN).await;
    file.expired.store(true, Ordering::SeqCst);
    let rules = Config::parse(RULES, "rules.toml").unwrap().rules;
    let shellac = Shellac::start(origin.addr, move |c| {
        sliced(c);
        c.rules = rules;
    })
    .await;
    // The probe's slice (5) stored under the rule's ttl; slices 6 and 7 each fetched through
    // the rules, and 7 stored: the first rule's ttl ran on it (max-age=0 alone stores nothing).
    let probe = probe_then_slices_5_to_7(&shellac, &origin).await;
    assert_eq!(probe.header("x-slice-rule"), Some("ran"));
    let r = ranged(&shellac, 7 * MIB, 7 * MIB + 9).await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert!(r.body.as_ref() == bytes(1, 7 * MIB, 7 * MIB + 9).as_slice());
    assert_eq!(r.header("x-slice-rule"), Some("ran"));
    assert_eq!(r.header("x-seventh"), Some("yes"));
    assert_eq!(origin.count(), 3);
    // Slice 5 was stored with the first rule's field only.
    let r = ranged(&shellac, 5 * MIB, 5 * MIB + 9).await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(r.header("x-slice-rule"), Some("ran"));
    assert_eq!(r.header("x-seventh"), None);
    // Slice 6, whose ttl the second rule made zero, was sent but not stored: asked again,
    // sent again with the first rule's field, and again not stored.
    let r = ranged(&shellac, 6 * MIB, 6 * MIB + 9).await;
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    assert!(r.body.as_ref() == bytes(1, 6 * MIB, 6 * MIB + 9).as_slice());
    assert_eq!(r.header("x-slice-rule"), Some("ran"));
    assert_eq!(r.header("x-seventh"), None);
    assert_eq!(origin.count(), 4, "{:?}", asked(&origin));
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_insert"], 2, "{stats:?}");
    assert_eq!(stats["cache_uncacheable"], 2, "{stats:?}");
    assert_eq!(stats["slice_hit"], 3, "{stats:?}");
    shellac.stop().await;
}
