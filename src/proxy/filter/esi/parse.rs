//! The ESI fetch filter: the body passes through unchanged while `esi::Parser` reads it; at
//! its end the program (if the body held ESI) goes into a [`Slot`] the fill reads when it
//! stores the object ([`stored_fields`]: the program as the first stored field). The response
//! head gets the program field with the value `pending` (`esi::PENDING`), so the fetching
//! client, coalesced waiters and a pass — who stream the body before its program is known —
//! assemble it too, parsing as they go (`assemble.rs`).

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};

pub use super::super::handoff::Slot;
use super::super::{BodyFilter, Chunks, Effect, FilterError, Filters};
use crate::cache::StoredFields;
use crate::config::esi::EsiConfig;
use crate::esi::{Options, Parser, Program, Severity};
use crate::stats::Counters;
use crate::txlog::vsl::Transaction;

/// How the parser reads bodies under `config`.
pub fn options(config: &EsiConfig) -> Options {
    Options {
        xml_check: !config.disable_xml_check,
        remove_bom: config.remove_bom,
        ignore_other_elements: config.ignore_other_elements,
    }
}

/// Turns ESI on for the response being fetched (VCL `beresp.do_esi`, a rule's `esi = true`):
/// the parse filter joins the fetch chain, its slot goes to the fill. `url`: the backend
/// request's target, relative `src`s are resolved against it. Once per fetch (a retried
/// response keeps the filter it has).
/// `vsl`: the backend request's Varnish-style records, where the parse logs `ESI_xmlerror`.
pub fn turn_on(
    filters: &mut Filters,
    (config, counters): (&EsiConfig, &Arc<Counters>),
    url: &str,
    vsl: Option<Arc<Transaction>>,
) {
    if filters.esi.is_some() {
        return;
    }
    let slot = Arc::new(Slot::default());
    let parse: Box<dyn BodyFilter> = Box::new(Parse {
        parser: Some(Parser::new(url, options(config))),
        slot: slot.clone(),
        counters: counters.clone(),
        url: url.to_string(),
        vsl,
    });
    if let Ok(mut p) = slot.pending.lock() {
        *p = Some(parse);
    }
    filters.esi = Some(slot);
}

/// Adds the parse filter ESI was turned on with to the end of the fetch chain, after the
/// content-coding filters (an origin's gzip is decoded first: the program is made over the
/// identity bytes that are stored, `proxy/coding.rs`).
pub fn attach(filters: &mut Filters) {
    let pending = filters
        .esi
        .as_ref()
        .and_then(|slot| slot.pending.lock().ok().and_then(|mut p| p.take()));
    if let Some(parse) = pending {
        filters.fetch.push(parse);
    }
}

/// The fields to store for a response whose fetch had ESI on: the program first (as
/// `esi::FIELD`) when the body held ESI, the response's other fields after it. A page sent
/// gzip (`gzip`, `Slot::gzip`) is marked so (`esi::stored::GZIP`); one that held no ESI and
/// stays marked (`plain`, `Slot::gzip_plain`) gets the program of its `body_len` bytes
/// verbatim, so its mark is kept (with `[compression]` off; else the fill stores such a page
/// as a plain gzip object, `plain.rs`).
pub fn stored_fields(
    headers: &HeaderMap,
    program: Option<Program>,
    (gzip, plain): (bool, bool),
    body_len: u64,
) -> StoredFields {
    let program = program.or_else(|| {
        (gzip && plain).then(|| {
            let mut p = Program::default();
            p.push_run(true, body_len);
            p
        })
    });
    let value = program.map(|p| crate::esi::stored::field_value(&p.to_field(), gzip));
    let first = value.as_deref().map(|v| (crate::esi::FIELD, v.as_bytes()));
    StoredFields::from_pairs(
        first.into_iter().chain(
            headers
                .iter()
                .filter(|(n, _)| n.as_str() != crate::esi::FIELD)
                .map(|(n, v)| (n.as_str(), v.as_bytes())),
        ),
    )
}

/// The parse filter.
struct Parse {
    parser: Option<Parser>,
    slot: Arc<Slot>,
    counters: Arc<Counters>,
    url: String,
    /// The backend request's Varnish-style records (held until the body's end, so its `End`
    /// comes after the `ESI_xmlerror`s).
    vsl: Option<Arc<Transaction>>,
}

impl Parse {
    fn finish(&mut self) {
        let Some(mut parser) = self.parser.take() else {
            return;
        };
        // An error at the body's end ("VEP ended inside a tag") counts too.
        parser.end_input();
        self.counters.esi_parsed.inc();
        self.counters.esi_errors.add(parser.errors());
        self.counters.esi_warnings.add(parser.warnings());
        let (program, diags) = parser.finish();
        for d in &diags {
            if let Some(t) = self.vsl.as_deref() {
                let line = match d.severity {
                    Severity::Error => format!("ERR: after {} {}", d.offset, d.message),
                    Severity::Warning => format!("WARN: after {} {}", d.offset, d.message),
                    Severity::Note => d.message.to_string(),
                };
                t.log("ESI_xmlerror", line);
            }
            match d.severity {
                Severity::Error => {
                    tracing::warn!(url = %self.url, offset = d.offset, "ESI_xmlerror: ERR: {}", d.message)
                }
                Severity::Warning => {
                    tracing::info!(url = %self.url, offset = d.offset, "ESI_xmlerror: WARN: {}", d.message)
                }
                Severity::Note => {
                    if d.message.starts_with("No ESI processing") {
                        self.counters.esi_not_xml.inc();
                    }
                    tracing::debug!(url = %self.url, "ESI_xmlerror: {}", d.message)
                }
            }
        }
        if let Some(program) = program {
            self.counters.esi_programs.inc();
            self.slot.put(program);
        }
    }
}

impl BodyFilter for Parse {
    fn name(&self) -> &'static str {
        "esi-parse"
    }

    fn effect(&self, _status: StatusCode, _fields: &HeaderMap) -> Effect {
        Effect::NONE
    }

    fn head(&mut self, fields: &mut HeaderMap) {
        let pending = if self.slot.gzip() {
            crate::esi::stored::GZIP_PENDING
        } else {
            crate::esi::stored::PENDING
        };
        fields.insert(
            HeaderName::from_static(crate::esi::FIELD),
            HeaderValue::from_static(pending),
        );
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        match input.poll_chunk(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(p) = self.parser.as_mut() {
                    p.feed(&chunk);
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(None) => {
                self.finish();
                Poll::Ready(None)
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Source;
    use super::*;

    #[tokio::test]
    async fn the_body_passes_unchanged_and_the_program_reaches_the_slot() {
        let mut filters = Filters::default();
        let counters = Arc::new(Counters::default());
        turn_on(
            &mut filters,
            (&EsiConfig::default(), &counters),
            "/dir/page",
            None,
        );
        turn_on(
            &mut filters,
            (&EsiConfig::default(), &counters),
            "/dir/page",
            None,
        );
        attach(&mut filters);
        let slot = filters.esi.clone().expect("slot");
        let mut fields = HeaderMap::new();
        let effect = filters.fetch.effect(StatusCode::OK, &fields);
        filters.fetch.head(effect, &mut fields);
        assert_eq!(fields[crate::esi::FIELD], "pending");
        let body = b"<p>a<esi:include src=\"frag\"/>b</p>";
        let mut out = filters.fetch.over(Source::new(
            body.chunks(7).map(Bytes::copy_from_slice).collect(),
        ));
        let mut got = Vec::new();
        while let Some(chunk) = std::future::poll_fn(|cx| out.poll_chunk(cx)).await {
            got.extend_from_slice(&chunk.expect("chunk"));
        }
        assert_eq!(got, body);
        let program = slot.take().expect("a program");
        assert_eq!(program.covered(), body.len() as u64);
        assert_eq!(
            program.includes().next().map(|i| i.src.path.as_str()),
            Some("/dir/frag")
        );
        assert_eq!(counters.esi_parsed.get(), 1);
        assert_eq!(counters.esi_programs.get(), 1);
        let stored = stored_fields(
            &fields,
            Some(program.clone()),
            (false, false),
            body.len() as u64,
        );
        assert!(crate::esi::marked(stored.block()));
        assert_eq!(
            crate::esi::stored_program(stored.block(), body.len() as u64),
            Some(Ok(program.clone()))
        );
        assert!(!crate::esi::stored_gzip(stored.block()));
        assert!(!crate::esi::marked(
            stored_fields(&fields, None, (false, false), 5).block()
        ));
        assert_eq!(stored_fields(&fields, None, (false, false), 5).len(), 0);
        // A page sent gzip keeps its mark, and one without ESI gets a verbatim program.
        let gzip = stored_fields(
            &fields,
            Some(program.clone()),
            (true, false),
            body.len() as u64,
        );
        assert!(crate::esi::stored_gzip(gzip.block()));
        assert_eq!(
            crate::esi::stored_program(gzip.block(), body.len() as u64),
            Some(Ok(program))
        );
        assert_eq!(stored_fields(&fields, None, (true, false), 5).len(), 0);
        let plain = stored_fields(&fields, None, (true, true), 5);
        assert!(crate::esi::stored_gzip(plain.block()));
        assert_eq!(
            crate::esi::stored_program(plain.block(), 5),
            Some(Ok(crate::esi::Program {
                ops: vec![crate::esi::Op::Verbatim(5)]
            }))
        );
    }

    #[tokio::test]
    async fn a_body_not_starting_with_lt_is_not_parsed() {
        let mut filters = Filters::default();
        let counters = Arc::new(Counters::default());
        turn_on(&mut filters, (&EsiConfig::default(), &counters), "/", None);
        attach(&mut filters);
        let slot = filters.esi.clone().expect("slot");
        let mut out = filters.fetch.over(Source::new(vec![Bytes::from_static(
            b"{\"a\": \"<esi:include src=/x/>\"}",
        )]));
        while std::future::poll_fn(|cx| out.poll_chunk(cx))
            .await
            .is_some()
        {}
        assert!(slot.take().is_none());
        assert_eq!(counters.esi_not_xml.get(), 1);
    }

    /// Trunk e00008: a body ending inside a tag is an ESI error the counter holds (it was
    /// noticed after the count was taken), and its ESI_xmlerror goes to the backend
    /// request's records, before their End and after where the parser last switched.
    #[tokio::test]
    async fn an_error_at_the_body_end_is_counted_and_logged() {
        use crate::txlog::vsl::{Side, Transaction, Vsl};
        let vsl = Arc::new(Vsl::default());
        vsl.set_capacity(64);
        let tx = Arc::new(Transaction::begin(
            vsl.clone(),
            1004,
            Side::Backend,
            ("bereq", 1003, "fetch"),
        ));
        let mut filters = Filters::default();
        let counters = Arc::new(Counters::default());
        turn_on(
            &mut filters,
            (&EsiConfig::default(), &counters),
            "/body",
            Some(tx.clone()),
        );
        drop(tx);
        attach(&mut filters);
        let body = b"<pre>Included file</pre>\n<esi:remove>\n<Aaa\n";
        let mut out = filters
            .fetch
            .over(Source::new(vec![Bytes::from_static(body)]));
        while std::future::poll_fn(|cx| out.poll_chunk(cx))
            .await
            .is_some()
        {}
        drop(out);
        assert_eq!(counters.esi_errors.get(), 1);
        let (text, _) = vsl.since(0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1..],
            [
                "2 1004 b ESI_xmlerror ERR: after 25 VEP ended inside a tag",
                "3 1004 b End "
            ],
            "{text}"
        );
    }
}
