//! What a fetch filter leaves for the fill that stores the object: the ESI program
//! ([`Slot`], `esi/parse.rs`) and what a gzip filter learnt of the identity ([`Decoded`],
//! `gzip.rs`). Both hang off the request's [`Filters`](super::Filters).

use std::sync::Mutex;

use super::body_filter::BodyFilter;
use crate::cache::identity::Identity;
use crate::esi::Program;

/// Where the ESI fetch filter leaves the program for the fill; and the filter itself until it
/// joins the fetch chain (`esi::attach`).
#[derive(Default)]
pub struct Slot {
    program: Mutex<Option<Program>>,
    pub(super) pending: Mutex<Option<Box<dyn BodyFilter>>>,
}

impl Slot {
    pub(super) fn put(&self, program: Program) {
        if let Ok(mut p) = self.program.lock() {
            *p = Some(program);
        }
    }

    /// The program, once the body ended; `None` when it held no ESI.
    pub fn take(&self) -> Option<Program> {
        self.program.lock().ok().and_then(|mut p| p.take())
    }
}

/// Where a fetch filter that stores a body encoded (`gzip::Gzip`, `gzip::TestGunzip`) leaves
/// what it learnt of the identity representation — its length, and for a body Shellac gzipped
/// the origin's strong `ETag` — for the fill to store with the object (`cache/identity.rs`).
#[derive(Debug, Default)]
pub struct Decoded(Mutex<Option<Identity>>);

impl Decoded {
    pub(super) fn put(&self, identity: Identity) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(identity);
        }
    }

    /// What the filter left, once the body ended whole.
    pub fn take(&self) -> Option<Identity> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}
