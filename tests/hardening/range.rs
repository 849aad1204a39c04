//! Range requests (RFC 9110 §14): the work one request can cause is bounded by the object
//! size — too many ranges, or overlapping ranges adding up to more than the body, get the
//! whole object (200) instead of a multipart amplification.

use super::*;

fn ranged(range: &str) -> String {
    format!("GET /r HTTP/1.1\r\nHost: a\r\nRange: {range}\r\nConnection: close\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_amplification_is_bounded() {
    let bench = Bench::start().await;
    let seventeen = vec!["0-0"; 17].join(",");
    let v = vec![
        Vector::new("fill", ranged("bytes=0-0")).expect(&[206], 1),
        Vector::new("two small ranges", ranged("bytes=0-0,1-1")).expect(&[206], 0),
        Vector::new("overlapping whole ranges", ranged("bytes=0-,0-")).expect(&[200], 0),
        Vector::new("overlap beyond the body", ranged("bytes=0-1,0-1")).expect(&[200], 0),
        Vector::new("17 ranges", ranged(&format!("bytes={seventeen}"))).expect(&[200], 0),
        Vector::new("unsatisfiable", ranged("bytes=5-9")).expect(&[416], 0),
        Vector::new("other unit", ranged("items=0-1")).expect(&[200], 0),
        Vector::new("garbage", ranged("bytes=a-b")).expect(&[200], 0),
    ];
    bench.run(&v).await;
    bench.stop().await;
}
