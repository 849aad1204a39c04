//! VCL features beyond the basics, end to end: restart limits, buffered fetches, purges from
//! vcl_hit/vcl_miss and the other Varnish variables Shellac gives behaviour to.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::get;
use common::vcl::start_vcl;

/// An address nothing listens on (a port bound and released).
fn dead_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// Regression (issue 21, varnishtest c00028): a vcl_synth that always restarts, after a
/// fetch that vcl_backend_error abandons, looped forever. Past max_restarts vcl_synth runs
/// once more and its response is delivered whatever it returns.
#[tokio::test]
async fn a_synth_that_always_restarts_stops_at_max_restarts() {
    let vcl = r#"vcl 4.1;
backend bad { ${origin0} }
sub vcl_backend_error { return (abandon); }
sub vcl_synth {
    set resp.http.restarts = req.restarts;
    return (restart);
}
"#;
    let shellac = start_vcl("synth-restart", vcl, &[dead_addr()]).await;
    let r = tokio::time::timeout(Duration::from_secs(20), get(shellac.addr, "/"))
        .await
        .expect("answers instead of restarting forever");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("restarts"), Some("5"));
    // The same without a backend: vcl_recv answers, vcl_synth restarts.
    let vcl = r#"vcl 4.1;
backend none none;
sub vcl_recv { return (synth(404)); }
sub vcl_synth {
    set resp.http.restarts = req.restarts;
    return (restart);
}
"#;
    let other = start_vcl("recv-synth-restart", vcl, &[]).await;
    let r = tokio::time::timeout(Duration::from_secs(20), get(other.addr, "/"))
        .await
        .expect("answers instead of restarting forever");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("restarts"), Some("5"));
    shellac.stop().await;
    other.stop().await;
}
