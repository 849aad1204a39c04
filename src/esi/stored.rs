//! How a program travels with its object: as the stored field [`FIELD`] (the program's
//! encoding in base64), the first field of the stored object so a hit finds it with one
//! comparison (the fast-hit path, `proxy/fast_hit/`, steps aside for it), kept by every tier as it keeps the other fields
//! (memory, disk, fleet: no format change). The field is internal: removed from every backend
//! response before anything reads it and from every delivery.
//!
//! The field's value starts with [`GZIP`] when the page is sent gzip to clients that take it
//! (Varnish's gzip-stored ESI object: the origin sent it gzip, or the policy gzipped it):
//! the stored bytes are identity either way (the program is over them), the mark says how
//! the assembled page goes out ([`stored_gzip`]).
//!
//! And how deep a request is: [`Level`], a request extension an include's sub-request carries
//! (`req.esi_level` in VCL; absent: 0), and the client's request it serves: [`Top`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;

use super::program::{DecodeError, Program};

/// The stored field that carries an object's ESI program. On a response being fetched (before
/// its body is parsed) its value is [`PENDING`]: the delivery then parses as it assembles.
pub const FIELD: &str = "shellac-esi";

/// The value of [`FIELD`] on a response whose program is not known yet.
pub const PENDING: &str = "pending";

/// The start of [`FIELD`]'s value on a page sent gzip to clients that take gzip (not a
/// base64 character: a program's value never starts with it).
pub const GZIP: &str = "gzip;";

/// [`PENDING`] on a page sent gzip.
pub const GZIP_PENDING: &str = "gzip;pending";

/// The value of [`FIELD`] for `value` (a program's, or [`PENDING`]) on a page sent gzip
/// (`gzip`) or identity.
pub fn field_value(value: &str, gzip: bool) -> String {
    if gzip {
        format!("{GZIP}{value}")
    } else {
        value.to_string()
    }
}

/// The ESI depth of a request: 0 for a client's, n+1 for an include of a level-n page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Level(pub u8);

/// The target of the page an include's sub-request was made for (the access log's
/// `%{esi_parent}x`): a request extension of every sub-request.
#[derive(Debug, Clone)]
pub struct Parent(pub std::sync::Arc<str>);

/// The client's request an include's sub-request was made for (VCL's `req_top.*`), as it
/// was when its page's delivery began: a request extension every sub-request of the tree
/// carries (absent: the request is its own top).
#[derive(Debug, Clone)]
pub struct Top(pub std::sync::Arc<TopRequest>);

/// What `req_top.*` reads.
#[derive(Debug)]
pub struct TopRequest {
    pub method: http::Method,
    /// The target as sent (`req_top.url`).
    pub url: String,
    pub version: http::Version,
    pub headers: http::HeaderMap,
    /// `req_top.time`: when VCL first saw it, seconds since the epoch (`None`: no VCL).
    pub time: Option<f64>,
}

impl Program {
    /// The value of [`FIELD`] for this program.
    pub fn to_field(&self) -> String {
        STANDARD_NO_PAD.encode(self.encode())
    }

    /// A program read back from a [`FIELD`] value, for a body of `body_len` bytes.
    pub fn from_field(value: &[u8], body_len: u64) -> Result<Program, DecodeError> {
        let bytes = STANDARD_NO_PAD
            .decode(value)
            .map_err(|_| DecodeError::Truncated)?;
        Program::decode(&bytes, body_len)
    }
}

/// Whether a stored field block (`name:value\n` per field) starts with the program field:
/// the cheap check a fast hit makes.
pub fn marked(block: &[u8]) -> bool {
    block.len() > FIELD.len() && block.starts_with(FIELD.as_bytes()) && block[FIELD.len()] == b':'
}

/// The program stored in a field block whose first field is [`FIELD`]: `None` when there is
/// none, `Some(Err)` when it cannot be read (a damaged object: delivered as it is, counted).
pub fn stored_program(block: &[u8], body_len: u64) -> Option<Result<Program, DecodeError>> {
    if !marked(block) {
        return None;
    }
    let value = field_of(block);
    let value = value.strip_prefix(GZIP.as_bytes()).unwrap_or(value);
    if value == PENDING.as_bytes() {
        return None;
    }
    Some(Program::from_field(value, body_len))
}

/// Whether a field block's program field says the page goes out gzip to clients that take
/// it (its value starts with [`GZIP`]).
pub fn stored_gzip(block: &[u8]) -> bool {
    marked(block) && field_of(block).starts_with(GZIP.as_bytes())
}

/// The value of the program field that starts a [`marked`] block.
fn field_of(block: &[u8]) -> &[u8] {
    let rest = &block[FIELD.len() + 1..];
    rest.split(|b| *b == b'\n').next().unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::esi::{Include, Op, Target};

    #[test]
    fn a_program_survives_its_field() {
        let p = Program {
            ops: vec![
                Op::Verbatim(3),
                Op::Include(Include {
                    src: Target {
                        host: None,
                        https: false,
                        path: "/f".into(),
                    },
                    alt: None,
                    continue_on_error: false,
                }),
                Op::Skip(2),
            ],
        };
        let block = format!("{FIELD}:{}\ncontent-type:text/html\n", p.to_field());
        assert!(marked(block.as_bytes()));
        assert_eq!(stored_program(block.as_bytes(), 5), Some(Ok(p.clone())));
        assert!(matches!(
            stored_program(block.as_bytes(), 6),
            Some(Err(DecodeError::Length { .. }))
        ));
        assert!(!stored_gzip(block.as_bytes()));
        let gzip = format!("{FIELD}:{}\n", field_value(&p.to_field(), true));
        assert!(stored_gzip(gzip.as_bytes()));
        assert_eq!(stored_program(gzip.as_bytes(), 5), Some(Ok(p)));
        assert_eq!(GZIP_PENDING, field_value(PENDING, true));
        assert_eq!(stored_program(b"shellac-esi:gzip;pending\n", 5), None);
        assert!(stored_gzip(b"shellac-esi:gzip;pending\n"));
        assert!(!marked(b"content-type:text/html\n"));
        assert!(!marked(b"shellac-esix:1\n"));
        assert_eq!(stored_program(b"shellac-esi:pending\n", 5), None);
        assert!(matches!(
            stored_program(b"shellac-esi:!!\n", 5),
            Some(Err(_))
        ));
    }
}
