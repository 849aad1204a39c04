//! A fast hit's last steps: the head to write (the object's prepared head; under VCL with the
//! fields vcl_deliver adds and its `X-Varnish`), the hit counted as the full path counts it,
//! and the body with its transaction record.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::super::Proxy;
use super::super::body::ResponseBody;
use super::super::observe::{self, FastHit};
use super::super::site::Site;
use super::FastAnswer;
use super::head::Head;
use crate::cache::{Object, Prepared};

impl Proxy {
    /// Under VCL: the head with the fields vcl_deliver adds — `Some(None)` without a program,
    /// `None` declines the hit (vcl_deliver would do more). The log captures response fields
    /// from the object's map, which has none of those: with response fields in the log format
    /// such a hit takes the full path.
    #[inline]
    pub(super) fn vcl_deliver_head(
        &self,
        head: &Head<'_, '_>,
        client: SocketAddr,
        object: &Object,
        prepared: &Prepared,
    ) -> Option<Option<Bytes>> {
        let Some(rt) = &self.vcl else {
            return Some(None);
        };
        if rt.program.defines(crate::vcl::types::Method::Deliver)
            && self
                .log_format
                .as_ref()
                .is_some_and(|f| !f.response_headers.is_empty())
        {
            return None;
        }
        // `obj.hits` counts this hit (vcl_deliver's dry run may read it); a hit the fast path
        // declines is counted again by the full path, so it takes it back.
        object.count_hit();
        let vcl_head = super::super::vcl::fast_head(
            rt,
            (head.method.as_str(), head.target, head.fields, client),
            object,
            prepared,
        );
        if vcl_head.is_none() {
            object.uncount_hit();
        }
        Some(Some(vcl_head?))
    }

    /// The answer: the hit counted, its head (`vcl_head`, else the prepared one), the body
    /// (the object moves into it: no second reference count per hit) and its record.
    #[inline]
    pub(super) fn answer(
        &self,
        head: Head<'_, '_>,
        (client, tls, site): (
            SocketAddr,
            Option<&crate::tls::server::ConnTls>,
            Option<&Site>,
        ),
        (object, prepared, vcl_head): (Arc<Object>, &Prepared, Option<Bytes>),
        started: Instant,
    ) -> FastAnswer {
        let counters = &self.counters;
        counters.client_req.inc();
        counters.cache_hit.inc();
        counters.cache_hit_fast.inc();
        if object.state.from_disk() {
            counters.cache_hit_disk.inc();
        } else {
            counters.cache_hit_memory.inc();
        }
        let status = object.status;
        let wire = match (vcl_head, &self.vcl) {
            (Some(wire), Some(rt)) => super::super::vcl::with_xid(rt, &wire),
            _ => prepared.wire(status).clone(),
        };
        let body = if head.head_only {
            ResponseBody::empty()
        } else {
            ResponseBody::object(object)
        }
        .counted(counters.clone());
        let ttfb = started.elapsed();
        counters.ttfb.observe(ttfb);
        if let Some(s) = site {
            s.stats.ttfb.observe(ttfb);
        }
        let record = observe::fast_hit_record(
            self,
            FastHit {
                client: client.ip(),
                method: head.method,
                target: head.target,
                host: head.host.as_bytes(),
                user_agent: head.user_agent,
                fields: head.fields,
                status: status.as_u16(),
                response: &prepared.map,
                site,
                started,
                ttfb,
                tls,
            },
        );
        let record = record.map(|mut r| {
            if self.vcl.is_some() {
                r.set_vcl(Some(super::super::vcl::FAST_HIT_TRACE));
            }
            r
        });
        let body = match record {
            Some(r) => body.recorded(r),
            None => body,
        };
        let add_date = !wire.ends_with(b"\r\n\r\n");
        FastAnswer {
            head: wire,
            add_date,
            body,
        }
    }
}
