//! Edge Side Includes as body filters (issue 29, docs/esi.md): the fetch filter that parses a
//! body into its program as it is fetched ([`parse`]), stored with the object so a hit never
//! parses again, and the delivery filter that assembles the page from the program with its
//! includes fetched as sub-requests through the whole proxy ([`assemble`], [`include`],
//! [`fetch`]).

pub mod assemble;
pub mod fetch;
pub mod gzip;
pub mod include;
pub mod parse;
pub mod plain;
pub mod prime;
mod task;

/// The program field's name (`esi::FIELD`) as a header name, parsed once.
pub const FIELD: http::HeaderName = http::HeaderName::from_static(crate::esi::FIELD);

pub use assemble::Assemble;
pub use gzip::GzipPage;
pub use include::Page;
pub use parse::{Slot, attach, stored_fields, turn_on};
pub use prime::{Prime, needs_prime, needs_settle, prime, settle};

/// A body of given chunks, for the tests.
#[cfg(test)]
pub(super) struct Source(std::collections::VecDeque<bytes::Bytes>);

#[cfg(test)]
impl Source {
    pub(super) fn new(chunks: Vec<bytes::Bytes>) -> Source {
        Source(chunks.into())
    }
}

#[cfg(test)]
impl super::Chunks for Source {
    fn poll_chunk(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<bytes::Bytes, super::FilterError>>> {
        std::task::Poll::Ready(self.0.pop_front().map(Ok))
    }
}
