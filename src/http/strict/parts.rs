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

    /// A new head: its request line's method ends at `method_end`, its target at `target_end`.
    pub(super) fn start(&mut self, method_end: usize, target_end: usize, http10: bool) {
        self.count = 0;
        self.more = false;
        self.http10 = http10;
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

#[cfg(test)]
mod tests {
    use super::super::{Limits, Scan, Scanner, as_http11};
    use super::*;

    /// What httparse (hyper's parser) reads in `head`: method, path, version, fields.
    type Read = (Vec<u8>, Vec<u8>, u8, Vec<(Vec<u8>, Vec<u8>)>);

    fn httparse_reads(head: &[u8]) -> Read {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut fields);
        assert!(
            matches!(req.parse(head), Ok(httparse::Status::Complete(n)) if n == head.len()),
            "{:?}",
            String::from_utf8_lossy(head)
        );
        let fields = req
            .headers
            .iter()
            .map(|f| (f.name.as_bytes().to_vec(), f.value.to_vec()))
            .collect();
        let method = req.method.unwrap_or_default().as_bytes().to_vec();
        let path = req.path.unwrap_or_default().as_bytes().to_vec();
        (method, path, req.version.unwrap_or(9), fields)
    }

    fn parts_read(parts: &Parts, head: &[u8]) -> Option<Read> {
        let fields = parts
            .fields(head)?
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        let version = if parts.http10() { 0 } else { 1 };
        Some((
            parts.method(head).to_vec(),
            parts.target(head).to_vec(),
            version,
            fields,
        ))
    }

    /// The parts the scanner keeps are what httparse reads in the same head, whether the head
    /// came in one read or in two (parsed again whole); a head with more fields than the parts
    /// hold says so.
    #[test]
    fn parts_are_what_httparse_reads() {
        let heads = [
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_string(),
            "HEAD /x?y=1&z={2} HTTP/1.1\r\nhost:a.example:8080\r\nUser-Agent: wrk\r\n\r\n".into(),
            "GET /p HTTP/1.1\r\nHost: \t a \t\r\nX-Empty:\r\nX-Spaces:   \r\nX-Obs: caf\u{e9} \r\n\r\n"
                .into(),
            "GET /a%2Fb HTTP/1.0\r\nAccept: */*\r\n\r\n".into(),
            "GET / HTTP/1.7\r\nHost: a\r\nContent-Length: 0\r\n\r\n".into(),
            "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n".into(),
            "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n".into(),
            "GET http://b.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n".into(),
            format!(
                "GET / HTTP/1.1\r\nHost: a\r\n{}\r\n",
                (1..MAX_PART_FIELDS).fold(String::new(), |s, i| s + &format!("F{i}: {i}\r\n"))
            ),
        ];
        for text in heads {
            for split in [text.len(), text.len() / 2, 5] {
                let mut bytes = text.clone().into_bytes();
                let mut s = Scanner::new(Limits::default());
                s.keep_parts();
                if split < bytes.len() {
                    assert_eq!(s.scan(&bytes[..split]), Scan::Incomplete, "{text:?}");
                }
                let Scan::Head(n, head) = s.scan(&bytes) else {
                    panic!("refused: {text:?}");
                };
                assert_eq!(n, bytes.len());
                if head.later_minor {
                    as_http11(&mut bytes);
                }
                let parts = s.parts().expect("kept");
                assert_eq!(
                    parts_read(parts, &bytes),
                    Some(httparse_reads(&bytes)),
                    "{text:?}"
                );
            }
        }
        let over = format!(
            "GET / HTTP/1.1\r\nHost: a\r\n{}\r\n",
            (0..MAX_PART_FIELDS).fold(String::new(), |s, i| s + &format!("F{i}: {i}\r\n"))
        );
        let mut s = Scanner::new(Limits::default());
        s.keep_parts();
        assert!(matches!(s.scan(over.as_bytes()), Scan::Head(..)));
        let parts = s.parts().expect("kept");
        assert!(parts.fields(over.as_bytes()).is_none());
        // The next head starts afresh.
        let next = b"GET /n HTTP/1.1\r\nHost: a\r\n\r\n";
        assert!(matches!(s.scan(next), Scan::Head(..)));
        let parts = s.parts().expect("kept");
        assert_eq!(parts.fields(next).map(|f| f.len()), Some(1));
        assert_eq!(parts.target(next), b"/n");
    }

    /// Without `keep_parts` the scanner keeps none (no memory per connection).
    #[test]
    fn parts_only_when_kept() {
        let mut s = Scanner::new(Limits::default());
        assert!(matches!(
            s.scan(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
            Scan::Head(..)
        ));
        assert!(s.parts().is_none());
    }
}
