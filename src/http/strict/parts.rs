//! Where the parts of the last head the strict parser accepted are (method, target, version,
//! each field's name and OWS-trimmed value), so that a reader of that head (the fast hit,
//! `proxy/fast_hit/`) uses this parse instead of parsing and checking the bytes again.

use super::tokens::trim_ows;

/// Fields whose places are kept at most; a head with more says so ([`Parts::fields`] is `None`).
pub const MAX_PART_FIELDS: usize = 32;

/// A field line's name and value, as offsets into its head.
#[derive(Clone, Copy, Debug, Default)]
struct Span {
    name: (u32, u32),
    value: (u32, u32),
}

/// The places of one accepted head's parts, as offsets into that head (the bytes from its
/// request line through its blank line). Filled by [`super::parse_head_into`], valid once it
/// accepted the head, and only for those bytes.
#[derive(Clone, Debug)]
pub struct Parts {
    method_end: u32,
    target: (u32, u32),
    http10: bool,
    escapes: bool,
    fields: [Span; MAX_PART_FIELDS],
    count: u32,
    /// More fields than `fields` holds, or a head too large for the offsets.
    more: bool,
}

impl Default for Parts {
    fn default() -> Self {
        Parts {
            method_end: 0,
            target: (0, 0),
            http10: false,
            escapes: false,
            fields: [Span::default(); MAX_PART_FIELDS],
            count: 0,
            more: false,
        }
    }
}

/// `head[range]`, or nothing when the range is not in it (`Parts` of another head).
fn part(head: &[u8], (from, to): (u32, u32)) -> &[u8] {
    head.get(from as usize..to as usize).unwrap_or_default()
}

impl Parts {
    /// The method (a token: ASCII).
    pub fn method<'h>(&self, head: &'h [u8]) -> &'h [u8] {
        part(head, (0, self.method_end))
    }

    /// The request target, as sent (visible ASCII without `"<>\#`: `tokens::TARGET`).
    pub fn target<'h>(&self, head: &'h [u8]) -> &'h [u8] {
        part(head, self.target)
    }

    /// Whether the target has a `%` (an escape): one without needs no normalising
    /// (`http::target::normalise` would find nothing to do).
    pub fn target_escapes(&self) -> bool {
        self.escapes
    }

    /// Whether the request line says `HTTP/1.0` (a later HTTP/1 minor version counts as 1.1).
    pub fn http10(&self) -> bool {
        self.http10
    }

    /// The fields in order: name (a token: ASCII) and value without the OWS around it, as
    /// httparse gives them; `None` when the head has more than [`MAX_PART_FIELDS`].
    pub fn fields<'p, 'h>(
        &'p self,
        head: &'h [u8],
    ) -> Option<impl ExactSizeIterator<Item = (&'h [u8], &'h [u8])> + use<'p, 'h>> {
        if self.more {
            return None;
        }
        let spans = self.fields.get(..self.count as usize)?;
        Some(
            spans
                .iter()
                .map(move |s| (part(head, s.name), part(head, s.value))),
        )
    }

    /// A new head: its request line's method ends at `method_end`, its target (with a `%`:
    /// `escapes`) at `target_end`.
    pub(super) fn start(
        &mut self,
        method_end: usize,
        target_end: usize,
        http10: bool,
        escapes: bool,
    ) {
        self.count = 0;
        self.more = false;
        self.http10 = http10;
        self.escapes = escapes;
        match (u32::try_from(method_end), u32::try_from(target_end)) {
            (Ok(m), Ok(t)) => {
                self.method_end = m;
                self.target = (m + 1, t);
            }
            _ => self.more = true,
        }
    }

    /// The field line of `head` whose name runs from `pos` to the colon at `name_end` and
    /// whose value ends at `value_end` (its CR).
    #[inline]
    pub(super) fn field(&mut self, head: &[u8], pos: usize, name_end: usize, value_end: usize) {
        let Some(slot) = self.fields.get_mut(self.count as usize) else {
            self.more = true;
            return;
        };
        let raw = head.get(name_end + 1..value_end).unwrap_or_default();
        let lead = raw.iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
        let value = trim_ows(raw);
        let from = name_end + 1 + lead;
        match (
            u32::try_from(pos),
            u32::try_from(name_end),
            u32::try_from(from),
            u32::try_from(from + value.len()),
        ) {
            (Ok(p), Ok(n), Ok(f), Ok(t)) => {
                *slot = Span {
                    name: (p, n),
                    value: (f, t),
                };
                self.count += 1;
            }
            _ => self.more = true,
        }
    }
}
