//! An ESI program: what the parser found in a body, stored with the object so a hit never
//! parses again. A body is covered from its first byte to its last by `Verbatim` and `Skip`
//! runs, with `Include`s between them; delivery walks the list once. The byte encoding
//! (`encode` / `decode`) is what the memory, disk and fleet tiers keep; `decode` checks
//! everything it reads, so a damaged program is an error, never a panic or a wrong page.

/// One step of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// The next `n` bytes of the stored body go to the client as they are.
    Verbatim(u64),
    /// The next `n` bytes of the stored body are ESI markup or removed content: not sent.
    Skip(u64),
    /// A fragment fetched (through the whole proxy) and sent in place.
    Include(Include),
}

/// An `<esi:include>`, its URL already resolved against the page's URL as Varnish does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// The fragment's target: `src` resolved.
    pub src: Target,
    /// W3C ESI 1.0 `alt=`: fetched when `src` fails.
    pub alt: Option<Target>,
    /// W3C ESI 1.0 `onerror="continue"`: a fragment that fails (and its `alt`) is dropped
    /// instead of failing the page.
    pub continue_on_error: bool,
}

/// Where a fragment is fetched from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `Some(host)` for an absolute `http://host/...` or `https://host/...` URL: the
    /// fragment request's Host. `None`: the page's own host.
    pub host: Option<String>,
    /// The URL was `https://`: the fragment is asked for through Shellac as an `http://`
    /// one is (the site for `host` decides how its origin is reached), as Varnish does with
    /// `+esi_ignore_https`; by default Varnish ignores such includes.
    pub https: bool,
    /// The request target (path and query), always starting with `/` for URLs that were
    /// absolute or root-relative.
    pub path: String,
}

/// A parsed page: the steps, and how many bytes of the stored body they cover.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Program {
    /// The steps in body order; adjacent runs of one kind are merged.
    pub ops: Vec<Op>,
}

/// Why stored program bytes could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("ESI program: unknown format version {0}")]
    Version(u8),
    #[error("ESI program: truncated")]
    Truncated,
    #[error("ESI program: unknown step {0:#04x}")]
    Step(u8),
    #[error("ESI program: a URL is not UTF-8")]
    Utf8,
    #[error("ESI program: covers {covered} bytes, the body has {body}")]
    Length { covered: u64, body: u64 },
}

const VERSION: u8 = 1;
const OP_VERBATIM: u8 = 1;
const OP_SKIP: u8 = 2;
const OP_INCLUDE: u8 = 3;
const F_HTTPS: u8 = 1;
const F_HOST: u8 = 2;
const F_ALT: u8 = 4;
const F_CONTINUE: u8 = 8;
const F_ALT_HTTPS: u8 = 16;
const F_ALT_HOST: u8 = 32;

impl Program {
    /// Appends a run of body bytes, merged with the previous run of the same kind.
    pub(crate) fn push_run(&mut self, verbatim: bool, n: u64) {
        if n == 0 {
            return;
        }
        match (self.ops.last_mut(), verbatim) {
            (Some(Op::Verbatim(m)), true) | (Some(Op::Skip(m)), false) => *m += n,
            _ => self.ops.push(if verbatim {
                Op::Verbatim(n)
            } else {
                Op::Skip(n)
            }),
        }
    }

    /// How many bytes of the stored body the program walks over.
    pub fn covered(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                Op::Verbatim(n) | Op::Skip(n) => *n,
                Op::Include(_) => 0,
            })
            .sum()
    }

    /// The includes, in page order.
    pub fn includes(&self) -> impl Iterator<Item = &Include> {
        self.ops.iter().filter_map(|op| match op {
            Op::Include(i) => Some(i),
            _ => None,
        })
    }

    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.ops.len() * 4);
        out.push(VERSION);
        for op in &self.ops {
            match op {
                Op::Verbatim(n) => {
                    out.push(OP_VERBATIM);
                    put_varint(&mut out, *n);
                }
                Op::Skip(n) => {
                    out.push(OP_SKIP);
                    put_varint(&mut out, *n);
                }
                Op::Include(inc) => {
                    out.push(OP_INCLUDE);
                    let mut flags = 0;
                    if inc.src.https {
                        flags |= F_HTTPS;
                    }
                    if inc.src.host.is_some() {
                        flags |= F_HOST;
                    }
                    if inc.continue_on_error {
                        flags |= F_CONTINUE;
                    }
                    if let Some(alt) = &inc.alt {
                        flags |= F_ALT;
                        if alt.https {
                            flags |= F_ALT_HTTPS;
                        }
                        if alt.host.is_some() {
                            flags |= F_ALT_HOST;
                        }
                    }
                    out.push(flags);
                    put_target(&mut out, &inc.src);
                    if let Some(alt) = &inc.alt {
                        put_target(&mut out, alt);
                    }
                }
            }
        }
        out
    }

    /// Reads a stored program back, checking that it covers exactly `body_len` bytes.
    pub fn decode(bytes: &[u8], body_len: u64) -> Result<Program, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        let version = r.byte()?;
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        let mut program = Program::default();
        while r.at < bytes.len() {
            match r.byte()? {
                OP_VERBATIM => program.ops.push(Op::Verbatim(r.varint()?)),
                OP_SKIP => program.ops.push(Op::Skip(r.varint()?)),
                OP_INCLUDE => {
                    let flags = r.byte()?;
                    let src = r.target(flags & F_HOST != 0, flags & F_HTTPS != 0)?;
                    let alt = if flags & F_ALT != 0 {
                        Some(r.target(flags & F_ALT_HOST != 0, flags & F_ALT_HTTPS != 0)?)
                    } else {
                        None
                    };
                    program.ops.push(Op::Include(Include {
                        src,
                        alt,
                        continue_on_error: flags & F_CONTINUE != 0,
                    }));
                }
                other => return Err(DecodeError::Step(other)),
            }
        }
        let covered = program.ops.iter().try_fold(0u64, |sum, op| match op {
            Op::Verbatim(n) | Op::Skip(n) => sum.checked_add(*n),
            Op::Include(_) => Some(sum),
        });
        match covered {
            Some(c) if c == body_len => Ok(program),
            Some(c) => Err(DecodeError::Length {
                covered: c,
                body: body_len,
            }),
            None => Err(DecodeError::Length {
                covered: u64::MAX,
                body: body_len,
            }),
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_target(out: &mut Vec<u8>, t: &Target) {
    if let Some(host) = &t.host {
        put_str(out, host);
    }
    put_str(out, &t.path);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.bytes.get(self.at).ok_or(DecodeError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError::Truncated)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let len = usize::try_from(self.varint()?).map_err(|_| DecodeError::Truncated)?;
        let end = self.at.checked_add(len).ok_or(DecodeError::Truncated)?;
        let raw = self.bytes.get(self.at..end).ok_or(DecodeError::Truncated)?;
        self.at = end;
        String::from_utf8(raw.to_vec()).map_err(|_| DecodeError::Utf8)
    }

    fn target(&mut self, has_host: bool, https: bool) -> Result<Target, DecodeError> {
        let host = if has_host { Some(self.string()?) } else { None };
        Ok(Target {
            host,
            https,
            path: self.string()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Program {
        Program {
            ops: vec![
                Op::Verbatim(10),
                Op::Skip(300),
                Op::Include(Include {
                    src: Target {
                        host: Some("a.example".into()),
                        https: true,
                        path: "/x?y".into(),
                    },
                    alt: Some(Target {
                        host: None,
                        https: false,
                        path: "/alt".into(),
                    }),
                    continue_on_error: true,
                }),
                Op::Include(Include {
                    src: Target {
                        host: None,
                        https: false,
                        path: "/plain".into(),
                    },
                    alt: None,
                    continue_on_error: false,
                }),
                Op::Verbatim(1 << 40),
            ],
        }
    }

    #[test]
    fn a_program_survives_its_stored_form() {
        let p = sample();
        let bytes = p.encode();
        assert_eq!(Program::decode(&bytes, p.covered()), Ok(p));
    }

    #[test]
    fn a_program_for_another_body_length_is_refused() {
        let p = sample();
        let err = Program::decode(&p.encode(), 5).unwrap_err();
        assert!(matches!(err, DecodeError::Length { body: 5, .. }));
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_an_error_or_a_valid_program() {
        let p = sample();
        let bytes = p.encode();
        for cut in 0..bytes.len() {
            assert!(
                Program::decode(&bytes[..cut], p.covered()).is_err(),
                "cut at {cut}"
            );
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                // Must not panic; a flip inside a URL may still decode to another program.
                let _ = Program::decode(&b, p.covered());
            }
        }
    }

    #[test]
    fn runs_of_one_kind_are_merged() {
        let mut p = Program::default();
        p.push_run(true, 3);
        p.push_run(true, 4);
        p.push_run(false, 0);
        p.push_run(false, 2);
        assert_eq!(p.ops, vec![Op::Verbatim(7), Op::Skip(2)]);
    }
}
