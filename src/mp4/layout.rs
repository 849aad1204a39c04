//! Where a file's top-level boxes are, as its first bytes say ([`scan`](super::scan)): a
//! fast-start file's `ftyp`, `moov` and `mdat` ([`Layout`]), or the `ftyp` and `mdat` of one
//! whose `moov` comes after its `mdat` ([`Late`]).

use std::ops::Range;

/// Where a file's top-level boxes are, from its first bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `ftyp`, sent first as it is.
    pub ftyp: Option<Range<usize>>,
    /// The whole `moov` box.
    pub moov: Range<usize>,
    /// Offset of the first `mdat` data byte after the `moov`, and its end (`None`: to the end
    /// of the file).
    pub mdat_data: u64,
    pub mdat_end: Option<u64>,
}

/// Where the first boxes of a file whose `moov` comes after its `mdat` are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Late {
    /// `ftyp`, in the first bytes.
    pub ftyp: Option<Range<usize>>,
    /// Offset of the first `mdat` data byte, and the mdat's end (`None`: it runs to the end
    /// of the file, so nothing comes after it).
    pub mdat_data: u64,
    pub mdat_end: Option<u64>,
}
