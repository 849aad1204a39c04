//! What a fetch filter leaves for the fill that stores the object: the ESI program
//! ([`Slot`], `esi/parse.rs`) and what a gzip filter learnt of the identity ([`Decoded`],
//! `gzip.rs`). Both hang off the request's [`Filters`](super::Filters).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::body_filter::BodyFilter;
use crate::cache::identity::Identity;
use crate::esi::Program;

/// Where the ESI fetch filter leaves the program for the fill; and the filter itself until it
/// joins the fetch chain (`esi::attach`).
#[derive(Default)]
pub struct Slot {
    program: Mutex<Option<Program>>,
    pub(super) pending: Mutex<Option<Box<dyn BodyFilter>>>,
    /// The page goes out gzip to clients that take it (`esi::stored::GZIP`): set by the
    /// fetch's coding decision (`proxy/coding.rs`) before the chain's head runs.
    gzip: AtomicBool,
    /// ... and so does the page if it holds no ESI (it is stored with a verbatim program).
    gzip_plain: AtomicBool,
}

impl Slot {
    /// Marks the page as sent gzip to clients that take it (the origin sent it gzip, or the
    /// policy gzips it), or not; `plain`: a page that holds no ESI too (else it is stored as
    /// any object, and `[compression]` treats it as one).
    pub fn set_gzip(&self, gzip: bool, plain: bool) {
        self.gzip.store(gzip, Ordering::Relaxed);
        self.gzip_plain.store(gzip && plain, Ordering::Relaxed);
    }

    /// Whether a page that holds no ESI is stored marked gzip.
    pub fn gzip_plain(&self) -> bool {
        self.gzip_plain.load(Ordering::Relaxed)
    }

    /// Whether the page goes out gzip to clients that take it.
    pub fn gzip(&self) -> bool {
        self.gzip.load(Ordering::Relaxed)
    }

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
