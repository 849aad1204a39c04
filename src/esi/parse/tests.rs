//! The parser's tests: bodies cut at every size give the same program and diagnostics.

use super::*;
use crate::esi::program::Op;

/// What a client receives (includes shown as `[src]`), the program and the diagnostics,
/// with the body fed in pieces of `piece` bytes.
fn run(
    body: &[u8],
    url: &str,
    options: Options,
    piece: usize,
) -> (String, Option<Program>, Vec<Diag>) {
    let mut parser = Parser::new(url, options);
    for chunk in body.chunks(piece.max(1)) {
        parser.feed(chunk);
    }
    let (program, diags) = parser.finish();
    let Some(program) = program else {
        return (String::from_utf8_lossy(body).into_owned(), None, diags);
    };
    let mut out = Vec::new();
    let mut at = 0usize;
    for op in &program.ops {
        match op {
            Op::Verbatim(n) => {
                out.extend_from_slice(&body[at..at + *n as usize]);
                at += *n as usize;
            }
            Op::Skip(n) => at += *n as usize,
            Op::Include(inc) => out.extend_from_slice(format!("[{}]", inc.src.path).as_bytes()),
        }
    }
    assert_eq!(
        program.covered(),
        body.len() as u64,
        "the program covers the whole body"
    );
    (
        String::from_utf8_lossy(&out).into_owned(),
        Some(program),
        diags,
    )
}

fn out(body: &str) -> String {
    run(
        body.as_bytes(),
        "/dir/page?q=1",
        Options::default(),
        usize::MAX,
    )
    .0
}

fn errors(body: &str) -> Vec<&'static str> {
    run(body.as_bytes(), "/", Options::default(), usize::MAX)
        .2
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.message)
        .collect()
}

#[test]
fn includes_removes_and_comments_are_replaced_and_the_rest_is_kept() {
    assert_eq!(
        out(
            "<html><esi:include src=\"/a\"/>x<esi:remove>gone</esi:remove>y<esi:comment text=\"c\"/>z</html>"
        ),
        "<html>[/a]xyz</html>"
    );
    assert_eq!(
        out("<p><!--esi <b><esi:include src='/f'/></b> -->."),
        "<p> <b>[/f]</b> ."
    );
}

#[test]
fn comments_and_cdata_are_passed_through_unparsed() {
    let body = "<a><!-- <esi:include src=\"/no\"/> --><![CDATA[<esi:include src=\"/no\"/>]]><esi:include src=\"/yes\"/>";
    assert_eq!(
        out(body),
        "<a><!-- <esi:include src=\"/no\"/> --><![CDATA[<esi:include src=\"/no\"/>]]>[/yes]"
    );
}

#[test]
fn a_body_without_esi_has_no_program() {
    assert!(
        run(b"<html>plain</html>", "/", Options::default(), 7)
            .1
            .is_none()
    );
}

#[test]
fn a_body_not_starting_with_lt_is_not_parsed_unless_the_check_is_off() {
    let body = b"  text <esi:include src=\"/x\"/>";
    let (_, program, diags) = run(body, "/", Options::default(), usize::MAX);
    assert!(program.is_none());
    assert_eq!(diags[0].severity, Severity::Note);
    let off = Options {
        xml_check: false,
        ..Options::default()
    };
    assert_eq!(run(body, "/", off, usize::MAX).0, "  text [/x]");
}

#[test]
fn varnish_e00010_other_elements_ignored_when_asked() {
    let body = b"\n\t\t<f<esi?\n\t\t<esi:remove>\n\t\t\tbar\n\t\t</esi:remove>\n\t\tfoo\n\t";
    let ignore = Options {
        ignore_other_elements: true,
        ..Options::default()
    };
    let (text, _, diags) = run(body, "/", ignore, 1);
    assert_eq!(text, "\n\t\t<f<esi?\n\t\t\n\t\tfoo\n\t");
    assert!(
        diags.iter().all(|d| d.severity != Severity::Error),
        "{diags:?}"
    );
    // Without it the `<f` element runs to the first `>`: the remove's end tag is stray.
    let (_, _, diags) = run(body, "/", Options::default(), usize::MAX);
    assert!(diags.iter().any(|d| d.severity == Severity::Error));
}

#[test]
fn a_byte_order_mark_is_skipped_when_asked() {
    let body = b"\xEF\xBB\xBF<esi:include src=\"/x\"/>";
    assert!(run(body, "/", Options::default(), usize::MAX).1.is_none());
    let bom = Options {
        remove_bom: true,
        ..Options::default()
    };
    assert_eq!(run(body, "/", bom, 1).0, "[/x]");
}

#[test]
fn include_urls_resolve_as_varnish_resolves_them() {
    let (_, program, _) = run(
        b"<esi:include src=\"http://Other.example/x?a=1&amp;b=2\"/><esi:include src=\"https://s.example/\"/>\
          <esi:include src=\"frag/a\"/><esi:include src=\"/abs\" alt=\"alt/b\" onerror=\"continue\"/>",
        "/dir/page?q=/x",
        Options::default(),
        usize::MAX,
    );
    let incs: Vec<_> = program
        .as_ref()
        .map(|p| p.includes().cloned().collect())
        .unwrap_or_default();
    assert_eq!(
        incs[0].src,
        Target {
            host: Some("Other.example".into()),
            https: false,
            path: "/x?a=1&b=2".into()
        }
    );
    assert_eq!(
        incs[1].src,
        Target {
            host: Some("s.example".into()),
            https: true,
            path: "/".into()
        }
    );
    assert_eq!(incs[2].src.path, "/dir/frag/a");
    assert_eq!(incs[3].src.path, "/abs");
    assert_eq!(
        incs[3].alt.as_ref().map(|t| t.path.as_str()),
        Some("/dir/alt/b")
    );
    assert!(incs[3].continue_on_error);
    assert!(!incs[0].continue_on_error);
    // A target without a '/' (varnishtest's "bar") gets one added, as in Varnish.
    let (text, _, _) = run(b"<esi:include src=\"foo\"/>", "bar", Options::default(), 1);
    assert_eq!(text, "[bar/foo]");
}

#[test]
fn varnish_e00006_absolute_src_without_a_path_is_invalid_and_https_warns() {
    // `http://foobar` names no request target: an error, the include dropped (Shellac once
    // asked for `/`).
    let (text, _, diags) = run(
        b"<esi:include src=\"http://foobar\" />1234",
        "/http",
        Options::default(),
        1,
    );
    assert_eq!(text, "1234");
    let words: Vec<_> = diags
        .iter()
        .map(|d| (d.severity, d.message, d.offset))
        .collect();
    assert_eq!(
        words,
        [(Severity::Error, "ESI 1.0 <esi:include> invalid src= URL", 0)]
    );
    // `https://` is asked for as `http://` is (Varnish's `+esi_ignore_https`), with
    // Varnish's warning first; without a path it is invalid too.
    let (text, _, diags) = run(
        b"<esi:include src=\"https://foobar\" />123456",
        "/https",
        Options::default(),
        usize::MAX,
    );
    assert_eq!(text, "123456");
    let words: Vec<_> = diags.iter().map(|d| (d.severity, d.message)).collect();
    assert_eq!(
        words,
        [
            (
                Severity::Warning,
                "ESI 1.0 <esi:include> https:// treated as http://"
            ),
            (Severity::Error, "ESI 1.0 <esi:include> invalid src= URL"),
        ]
    );
    let (text, program, diags) = run(
        b"<esi:include src=\"https://h.example/f\"/>",
        "/",
        Options::default(),
        usize::MAX,
    );
    assert_eq!(text, "[/f]");
    assert!(program.is_some());
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].severity, Severity::Warning);
    assert_eq!(
        errors("<esi:include src=\"http:///x\"/>"),
        ["ESI 1.0 <esi:include> invalid src= URL"]
    );
}

#[test]
fn malformed_esi_is_reported_with_varnishs_words_and_dropped() {
    assert_eq!(errors("<esi:bogus/>"), ["ESI 1.0 <esi:bogus> element"]);
    assert_eq!(
        errors("<esi:include/>"),
        ["ESI 1.0 <esi:include> lacks src attr"]
    );
    assert_eq!(
        errors("<esi:include src=\"/a b\"/>"),
        ["ESI 1.0 <esi:include> has whitespace in src= attribute"]
    );
    assert_eq!(
        errors("<esi:include src=\"/a\" src=\"/b\"/>"),
        ["ESI 1.0 <esi:include> has multiple src= attributes"]
    );
    assert_eq!(errors("<esi:remove/>"), ["ESI 1.0 <esi:remove/> not legal"]);
    assert_eq!(errors("</esi:remove>"), ["ESI 1.0 <esi:remove> not open"]);
    assert_eq!(
        errors("<esi:include src=\"/a\n"),
        ["VEP ended inside a tag"]
    );
    assert_eq!(
        errors("<esi:include src=\"/a\x01\"/>"),
        ["ESI 1.0 <esi:include> has a control character in its URL"]
    );
    let long = format!("<esi:include src=\"/{}\"/>", "a".repeat(MAX_ATTR + 1));
    assert_eq!(
        errors(&long),
        ["ESI 1.0 <esi:include> attribute value too long"]
    );
}

#[test]
fn varnish_e00001_remove_with_nested_tags() {
    let body = "\n\t\t<esi:remove>\n\t\tThis is a test: Unseen University\n\t\t<esi:include src=\"trick question\">\n\t\t<!--esi XXX -->\n\t\t</esi:remove>\n\t\t<esX>This is a test: Hello world\n\t";
    let off = Options {
        xml_check: true,
        remove_bom: false,
        ignore_other_elements: false,
    };
    let (text, _, diags) = run(body.as_bytes(), "/", off, usize::MAX);
    assert_eq!(text.len(), 40);
    let errs: Vec<_> = diags.iter().map(|d| d.message).collect();
    assert_eq!(
        errs,
        [
            "ESI 1.0 <esi:include> element nested in <esi:remove>",
            "ESI 1.0 Nested <!--esi element in <esi:remove>"
        ]
    );
}

#[test]
fn the_result_does_not_depend_on_where_the_body_is_cut() {
    let bodies: [&[u8]; 4] = [
        b"<html><esi:include src=\"/a\" alt='/b' onerror=continue /><!--esi <esi:remove>x</esi:remove> -->\
          <![CDATA[ <esi: ]]><!-- c --><esi:comment x/><esi:bogus>tail<esi:include\n src=/c\n/>",
        b"<1></esi:comment foo><1><2><esi:comment / ><esi:comment doo><2><3><esi:remove foo=\"bar\"></esi:remove><3>",
        b"<x><!--esi <!-- nested --> --> <!---->-->",
        b"<esi:remove><esi:include src=\"/x\"/></esi:remove><esi:include  k?=./><esi:include  src= />",
    ];
    for body in bodies {
        let whole = run(body, "/p/q", Options::default(), usize::MAX);
        for piece in 1..body.len() {
            let cut = run(body, "/p/q", Options::default(), piece);
            assert_eq!(cut.1, whole.1, "program, pieces of {piece}");
            assert_eq!(cut.2.len(), whole.2.len(), "diagnostics, pieces of {piece}");
        }
    }
}

#[test]
fn diagnostics_are_bounded_but_all_counted() {
    let body = "<x>".to_owned() + &"<esi:bogus/>".repeat(100);
    let mut parser = Parser::new("/", Options::default());
    parser.feed(body.as_bytes());
    assert_eq!(parser.errors(), 100);
    assert_eq!(parser.diags().len(), MAX_DIAGS);
}

/// What a client receives when the body is assembled as it is parsed (`take_ready` after
/// every piece, `end` at the end), includes shown as `[src]`.
fn streamed(body: &[u8], options: Options, piece: usize) -> String {
    let mut parser = Parser::new("/dir/page?q=1", options);
    let mut ops = Vec::new();
    for chunk in body.chunks(piece.max(1)) {
        parser.feed(chunk);
        ops.extend(parser.take_ready());
    }
    ops.extend(parser.end());
    let mut out = Vec::new();
    let mut at = 0usize;
    for op in &ops {
        match op {
            Op::Verbatim(n) => {
                out.extend_from_slice(&body[at..at + *n as usize]);
                at += *n as usize;
            }
            Op::Skip(n) => at += *n as usize,
            Op::Include(inc) => out.extend_from_slice(format!("[{}]", inc.src.path).as_bytes()),
        }
    }
    assert_eq!(at, body.len(), "the steps cover the whole body");
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn steps_taken_as_the_body_arrives_walk_it_as_the_whole_program_does() {
    let bodies: [&[u8]; 8] = [
        b"<html><esi:include src=\"/a\"/>x<esi:remove>gone</esi:remove>y<esi:comment text=\"c\"/>z</html>",
        b"<p><!--esi <b><esi:include src='/f'/></b> -->.",
        b"<a><!-- <esi:include src=\"/no\"/> --><![CDATA[<esi:include src=\"/no\"/>]]><esi:include src=\"/yes\"/>",
        b"  \n -not xml <esi:include src=\"/x\"/>",
        b"<html><body>no esi at all, a long run of text</body></html>",
        b"\xEF\xBB\xBF<p>bom and no esi</p>",
        b"\xEF\xBB\xBF<p>bom <esi:include src=\"b\"/></p>",
        b"<x><esi:include src=\"/open\"",
    ];
    for options in [
        Options::default(),
        Options {
            remove_bom: true,
            ..Options::default()
        },
        Options {
            xml_check: false,
            ..Options::default()
        },
    ] {
        for body in bodies {
            let whole = run(body, "/dir/page?q=1", options, usize::MAX).0;
            for piece in 1..=body.len() {
                assert_eq!(
                    streamed(body, options, piece),
                    whole,
                    "{:?} in pieces of {piece}",
                    String::from_utf8_lossy(body)
                );
            }
        }
    }
}
