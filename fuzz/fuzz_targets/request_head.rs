//! `check_head` never panics, and every head it accepts is one httparse (hyper's parser)
//! parses completely, with the same length: Shellac and hyper agree where a request ends. A
//! later HTTP/1 minor version (`HTTP/1.2`) is first rewritten to `HTTP/1.1`, as the gate does
//! before hyper reads the head (httparse knows only 1.0 and 1.1).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::http::strict::{Limits, as_http11, check_head};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let Ok(head) = check_head(data, &limits) else {
        return;
    };
    let mut data = data.to_vec();
    if head.later_minor {
        as_http11(&mut data);
    }
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(&data) {
        Ok(httparse::Status::Complete(n)) => assert_eq!(n, data.len(), "head length differs"),
        other => panic!("accepted by check_head, not by httparse: {other:?}"),
    }
});
