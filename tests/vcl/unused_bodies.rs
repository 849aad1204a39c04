//! Backend responses the fetch does not use — VCL restarts, retries or answers itself on
//! the response's head — give their keep-alive connection back when their body is small and
//! already on its way: it is read to its end (at most 64 KiB, within 100 ms) instead of the
//! connection being closed under the unread bytes (`BackendBody::drain`; Varnish 2.1 reuses
//! it, varnishtest 2.1.5/b00019). Counted in `backend_drained` / `backend_drain_closed`.

use crate::common;
use common::vcl::start_vcl_with;
use common::{Origin, Reply, get};

/// Regression (2.1.5/b00019): a 2.x `restart` in vcl_fetch, on every response, until the
/// restarts run out: one backend connection serves every fetch, each unused body drained.
/// As in Varnish 2.1, the request goes to vcl_error once `max_restarts` restarts are
/// reached (after vcl_recv), reading `req.restarts == max_restarts`: two fetches for 2.
#[tokio::test]
async fn varnish_b00019_restarts_in_vcl_fetch_reuse_the_backend_connection() {
    let origin = Origin::start(|_| Reply::ok("012345\n")).await;
    let vcl = r#"backend b { ${origin0} }
sub vcl_fetch { restart; }
sub vcl_error {
    if (req.restarts == 2) {
        set obj.status = 200;
        set obj.response = "restart=2";
    } elsif (req.restarts > 2) {
        set obj.status = 501;
    } else {
        set obj.status = 500;
    }
}
"#;
    let shellac = start_vcl_with("b00019", vcl, &[origin.addr], |c| c.vcl.max_restarts = 2).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(
        r.status, 200,
        "vcl_error reads req.restarts == max_restarts"
    );
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("backend_conn").await, 1);
    assert_eq!(shellac.stat("backend_reuse").await, 1);
    assert_eq!(shellac.stat("backend_drained").await, 2);
    assert_eq!(shellac.stat("backend_drain_closed").await, 0);
    shellac.stop().await;
}

/// A 4.x `return (retry)` and `return (abandon)` alike; a body over 64 KiB is not read:
/// its connection closes (counted) and the next fetch opens another.
#[tokio::test]
async fn retried_and_abandoned_responses_keep_their_connection_unless_large() {
    let big = "b".repeat(100 * 1024);
    let origin = Origin::start(move |seen| match seen.path.as_str() {
        "/big" => Reply::ok(&big),
        _ => Reply::ok("small error page"),
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    if (bereq.url == "/abandon") { return (abandon); }
    if (bereq.retries == 0) { return (retry); }
}
"#;
    let shellac = start_vcl_with("unused-bodies", vcl, &[origin.addr], |_| {}).await;
    let retried = get(shellac.addr, "/small").await;
    assert_eq!(retried.status, 200);
    assert_eq!(&retried.body[..], b"small error page");
    assert_eq!(shellac.stat("backend_drained").await, 1);
    let abandoned = get(shellac.addr, "/abandon").await;
    assert_eq!(abandoned.status, 503);
    assert_eq!(shellac.stat("backend_drained").await, 2);
    // Four small exchanges so far, all on the first connection.
    assert_eq!(shellac.stat("backend_conn").await, 1);
    let big = get(shellac.addr, "/big").await;
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), 100 * 1024);
    assert_eq!(shellac.stat("backend_drain_closed").await, 1);
    assert_eq!(shellac.stat("backend_drained").await, 2);
    assert_eq!(
        shellac.stat("backend_conn").await,
        2,
        "the big body's connection closed"
    );
    assert_eq!(origin.count(), 5);
    shellac.stop().await;
}
