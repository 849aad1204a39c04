//! A 4.x fetch around vcl_backend_response, as Varnish sets and logs it (varnishtest
//! trunk/b00002): a response without `Date` is given one before the subroutine (stored and
//! delivered with the object), and what the subroutine sets or unsets in `beresp` is logged
//! (`BerespHeader`, `BerespUnset`) before its `VCL_return`, under the program's spelling.

use crate::common;
use common::raw_origin::RawOrigin;
use common::vcl::start_vcl_with;
use common::{get, request};

/// The records of the backend transaction `vxid` (`log.vsl_records`, `GET /vsl`), as
/// (tag, data) pairs.
async fn backend_records(shellac: &common::Shellac, vxid: &str) -> Vec<(String, String)> {
    let r = request(shellac.admin, "GET", "/vsl?after=0", &[], b"").await;
    String::from_utf8_lossy(&r.body)
        .lines()
        .filter_map(|line| {
            let mut f = line.splitn(5, ' ');
            let (_seq, x, side, tag) = (f.next()?, f.next()?, f.next()?, f.next()?);
            (x == vxid && side == "b").then(|| (tag.to_string(), f.next().unwrap_or("").into()))
        })
        .collect()
}

/// Regression (trunk b00002's logexpect: `BerespHeader {^Date:}`, then `VCL_call`, then
/// `BerespHeader {^x-ttl: 0.000}`, then `VCL_return`): Shellac gave a date-less response no
/// `Date` before vcl_backend_response, and logged none of what the subroutine changed.
#[tokio::test]
async fn varnish_b00002_a_dateless_response_gets_a_date_and_beresp_changes_are_logged() {
    let origin = RawOrigin::start(|_| {
        b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\nx-gone: 1\r\ncontent-length: 2\r\n\r\nok"
            .to_vec()
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    set beresp.http.x-ttl = beresp.ttl;
    set beresp.http.X-Spelled = "Yes";
    unset beresp.http.x-gone;
    set beresp.http.x-date = beresp.http.date;
}
"#;
    let shellac = start_vcl_with("b00002-records", vcl, &[origin.addr], |c| {
        c.log.vsl_records = 1000;
    })
    .await;
    let miss = get(shellac.addr, "/").await;
    assert_eq!(miss.status, 200);
    let date = miss.header("x-date").expect("beresp.http.date").to_string();
    assert!(date.ends_with(" GMT"), "{date}");
    assert_eq!(miss.header("date"), Some(date.as_str()));
    assert_eq!(miss.header("x-gone"), None);
    // The hit is the stored object: its `Date` is the one given at the fetch.
    let hit = get(shellac.addr, "/").await;
    assert_eq!(hit.header("x-date"), Some(date.as_str()));
    assert_eq!(hit.header("date"), Some(date.as_str()));
    assert_eq!(origin.count(), 1);
    assert_eq!(shellac.stat("cache_hit").await, 1);

    // The miss's `X-Varnish` is its own id; the fetch is the next.
    let xid: u64 = miss.header("x-varnish").unwrap().parse().unwrap();
    let records = backend_records(&shellac, &(xid + 1).to_string()).await;
    let call = records
        .iter()
        .position(|(t, d)| t == "VCL_call" && d == "BACKEND_RESPONSE")
        .unwrap_or_else(|| panic!("{records:?}"));
    let around: Vec<(&str, &str)> = records[call - 1..]
        .iter()
        .take(7)
        .map(|(t, d)| (t.as_str(), d.as_str()))
        .collect();
    let date_line = format!("Date: {date}");
    let date_record = format!("x-date: {date}");
    assert_eq!(around.len(), 7, "{records:?}");
    assert_eq!(
        around[..2],
        [
            ("BerespHeader", date_line.as_str()),
            ("VCL_call", "BACKEND_RESPONSE"),
        ],
        "{records:?}"
    );
    assert_eq!(around[6], ("VCL_return", "deliver"), "{records:?}");
    // The changes, in the fields' order (not the statements').
    let mut changes = around[2..6].to_vec();
    changes.sort();
    assert_eq!(
        changes,
        [
            ("BerespHeader", "X-Spelled: Yes"),
            ("BerespHeader", date_record.as_str()),
            ("BerespHeader", "x-ttl: 60.000"),
            ("BerespUnset", "X-Gone: 1"),
        ],
        "{records:?}"
    );
    shellac.stop().await;
}
