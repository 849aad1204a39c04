//! The ESI parser never panics, covers every body byte, gives the same program however the
//! body is cut into chunks, and its program survives the stored form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shellac::esi::{Options, Parser, Program};

fuzz_target!(|data: &[u8]| {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let options = Options {
        xml_check: first & 1 == 0,
        remove_bom: first & 2 != 0,
        ignore_other_elements: first & 4 != 0,
    };
    let piece = usize::from(first >> 3).max(1);
    let mut whole = Parser::new("/dir/page?q", options);
    whole.feed(body);
    let (program, _) = whole.finish();
    let mut cut = Parser::new("/dir/page?q", options);
    for chunk in body.chunks(piece) {
        cut.feed(chunk);
    }
    let (cut_program, _) = cut.finish();
    assert_eq!(program, cut_program, "pieces of {piece}");
    if let Some(program) = program {
        assert_eq!(program.covered(), body.len() as u64);
        let bytes = program.encode();
        assert_eq!(Program::decode(&bytes, body.len() as u64).as_ref(), Ok(&program));
    }
});
