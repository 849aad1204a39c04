//! `check_head` never panics, and every head it accepts is one httparse (hyper's parser)
//! parses completely, with the same length: Shellac and hyper agree where a request ends. A
//! later HTTP/1 minor version (`HTTP/1.2`) is first rewritten to `HTTP/1.1`, as the gate does
//! before hyper reads the head (httparse knows only 1.0 and 1.1). The parts the parser notes
//! (`Parts`: what the fast hit reads instead of parsing again) are what httparse reads: method,
//! target, version, and each field's name and value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::http::strict::{Limits, Parts, as_http11, check_head, parse_head_into};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let Ok(head) = check_head(data, &limits) else {
        return;
    };
    let mut parts = Parts::default();
    assert!(matches!(
        parse_head_into(data, &limits, Some(&mut parts)),
        Ok(Some((n, _))) if n == data.len()
    ));
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
    assert_eq!(req.method.map(str::as_bytes), Some(parts.method(&data)));
    assert_eq!(req.path.map(str::as_bytes), Some(parts.target(&data)));
    assert_eq!(req.version == Some(0), parts.http10());
    if let Some(kept) = parts.fields(&data) {
        let kept: Vec<_> = kept.collect();
        assert_eq!(kept.len(), req.headers.len());
        for (f, (name, value)) in req.headers.iter().zip(kept) {
            assert_eq!(f.name.as_bytes(), name);
            assert_eq!(f.value, value);
        }
    } else {
        assert!(req.headers.len() > shellac::http::strict::MAX_PART_FIELDS);
    }
});
