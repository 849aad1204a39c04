//! How a page with ESI is delivered (docs/esi.md): assembled from its program through the
//! delivery chain (`filter/esi/`), gzipped for a client that takes gzip when the page is
//! marked so (`esi::stored::GZIP`: it came gzip, or the policy gzips it, as Varnish stores
//! it gzip), and one closed `Range` cut from the assembled bytes (`Content-Range: bytes
//! a-b/*`: the page's length is known only at its end), as Varnish's range filter does.

use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};

use super::body::ResponseBody;
use super::filter::esi;
use super::txn::{Step, Txn};
use crate::cache::Object;
use crate::http::accept_encoding::Coding;

impl Txn {
    /// A stored page with an ESI `program`, assembled (its head after its first bytes); its
    /// validators do not name the assembled bytes, so the request's conditionals are not
    /// answered from them, and a Range is cut from what is assembled ([`Txn::page_range`]).
    pub(super) fn deliver_page(
        &mut self,
        object: Arc<Object>,
        program: crate::esi::Program,
        cache_status: &str,
        now: Instant,
    ) -> Step {
        let gzip = crate::esi::stored_gzip(object.headers.block());
        let page = esi::Page::new(self.proxy.clone(), &self.req, self.client, self.vcl_time());
        self.filters
            .deliver
            .push(Box::new(esi::Assemble::stored(page.clone(), program)));
        self.esi_coding(gzip);
        let mut request = self.req.headers.clone();
        for name in [
            header::IF_NONE_MATCH,
            header::IF_MODIFIED_SINCE,
            header::IF_MATCH,
            header::IF_UNMODIFIED_SINCE,
            header::RANGE,
            header::IF_RANGE,
        ] {
            request.remove(name);
        }
        let resp = super::filter::object(
            &mut self.filters.deliver,
            object,
            &self.req.method,
            &request,
            self.head_only,
            now,
            cache_status,
        );
        let mut resp = self.page_range(resp);
        if !self.head_only {
            resp.extensions_mut().insert(esi::Prime(page));
        }
        Step::Deliver(resp)
    }

    /// An assembled page's `200` cut to the request's Range when it is one closed range
    /// (`bytes=a-b`): `206` with `Content-Range: bytes a-b/*` and the bytes from `a` to `b`
    /// of the assembled page (fewer when it ends before `b`), as Varnish answers it; any
    /// other Range, or one with `If-Range` (the page has no validator to match), gets the
    /// whole page.
    pub(super) fn page_range(&self, resp: Response<ResponseBody>) -> Response<ResponseBody> {
        if self.head_only || !self.ranged(resp.status()) {
            return resp;
        }
        let Some((start, end)) = super::respond::closed_range(self.req.headers.get(header::RANGE))
        else {
            return resp;
        };
        let Ok(range) = HeaderValue::from_str(&format!("bytes {start}-{end}/*")) else {
            return resp;
        };
        let (mut parts, body) = resp.into_parts();
        parts.status = StatusCode::PARTIAL_CONTENT;
        parts.headers.insert(header::CONTENT_RANGE, range);
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.remove(header::ACCEPT_RANGES);
        let body = ResponseBody::slice(body, start, end - start + 1);
        Response::from_parts(parts, body)
    }

    /// After an assembly in the delivery chain, for a page marked gzip (`gzip`): the page
    /// gzipped for a client that takes gzip (`filter/esi/gzip.rs`), decoded for one that
    /// does not (`Vary: Accept-Encoding` on both) — with `[compression]` off (Varnish's
    /// `http_gzip_support off`) sent gzip to every client, as stored. A page not marked goes
    /// out identity to all, without `Vary`; an include's page is left identity (it is
    /// spliced into its parent).
    pub(super) fn esi_coding(&mut self, gzip: bool) {
        let config = &self.proxy.config.compression;
        if !gzip
            || self
                .req
                .extensions
                .get::<crate::esi::Level>()
                .is_some_and(|l| l.0 > 0)
        {
            return;
        }
        let wanted = !config.enabled || self.filters.coding.accepts.accepts(Coding::Gzip);
        // VCL reads it in `resp.filters` (`gunzip`), as Varnish lists a gzip page's
        // delivery to a client without gzip.
        self.filters.coding.decoded = !wanted;
        self.filters.deliver.push(Box::new(esi::GzipPage::new(
            config.gzip_level,
            self.proxy.counters.clone(),
            wanted,
        )));
    }

    /// Whether a page with ESI is assembled for this request: noted for VCL
    /// (`obj.can_esi`, `resp.do_esi`), and not when VCL turned it off (`req.esi = false`).
    pub(super) fn esi_wanted(&mut self) -> bool {
        match self.vcl.as_deref_mut() {
            Some(v) => {
                v.state.esi_page = true;
                !v.state.esi_off
            }
            None => true,
        }
    }

    /// What the parse of a page parsed as it is delivered found before the deliver step
    /// (`esi::settle`): whether it is an ESI page, for VCL's `obj.can_esi` / `resp.do_esi`.
    pub(super) fn esi_settled(&mut self, esi: bool) {
        if let Some(v) = self.vcl.as_deref_mut() {
            v.state.esi_page = esi;
        }
    }

    /// Whether VCL turned the assembly of this request's page off after it was set up
    /// (`req.esi` / `resp.do_esi` set false in vcl_deliver).
    pub(super) fn esi_turned_off(&self) -> bool {
        self.vcl.as_ref().is_some_and(|v| v.state.esi_off)
    }

    /// `req.time` as VCL saw it (`req_top.time` of the request's includes).
    pub(super) fn vcl_time(&self) -> Option<f64> {
        self.vcl.as_ref().and_then(|v| v.state.req_time)
    }

    /// The ESI program stored with `object`, if any (a damaged one is counted and the object
    /// delivered as stored).
    pub(super) fn esi_program(&self, object: &Object) -> Option<crate::esi::Program> {
        match crate::esi::stored_program(object.headers.block(), object.body_len)? {
            Ok(program) => Some(program),
            Err(e) => {
                self.proxy.counters.esi_program_damaged.inc();
                tracing::warn!(error = %e, "stored ESI program unreadable; delivered as stored");
                None
            }
        }
    }
}
