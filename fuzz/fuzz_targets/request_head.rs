//! `check_head` never panics, and every head it accepts is one httparse (hyper's parser)
//! parses completely, with the same length: Shellac and hyper agree where a request ends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::http::strict::{Limits, check_head};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let Ok(_head) = check_head(data, &limits) else {
        return;
    };
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(data) {
        Ok(httparse::Status::Complete(n)) => assert_eq!(n, data.len(), "head length differs"),
        other => panic!("accepted by check_head, not by httparse: {other:?}"),
    }
});
