//! `Accept-Encoding` read as RFC 9110 §12.5.3 says (q-values, `q=0` refusals, `*`,
//! `identity`, `x-gzip`, any letter case, several field lines) and reduced to what matters to
//! a cache: which of the four codings Shellac stores — zstd, br, gzip, identity — the client
//! takes, and which one it gets when several are at hand. Like Varnish's "gzip washing", but
//! for all four: a URL has at most one variant per coding, not one per browser string.

use super::strict::trim_ows as trim;
/// A content coding Shellac stores and serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Coding {
    /// No coding.
    Identity,
    /// gzip (RFC 1952); `x-gzip` is the same.
    Gzip,
    /// Brotli (RFC 7932).
    Br,
    /// Zstandard (RFC 8878), with the window of at most 8 MB that RFC 9659 requires on the web.
    Zstd,
}

impl Coding {
    /// Every coding, in the server's order of preference, best first (smallest bytes for
    /// the same text; all four decode fast).
    pub const PREFERENCE: [Coding; 4] = [Coding::Zstd, Coding::Br, Coding::Gzip, Coding::Identity];

    /// The token in `Content-Encoding` (and in logs and counters).
    pub fn as_str(self) -> &'static str {
        match self {
            Coding::Identity => "identity",
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The coding a `Content-Encoding` value names, when it is one of the four (`None` for
    /// others, e.g. `deflate`, `compress`, or a list of several codings).
    pub fn from_content_encoding(value: &[u8]) -> Option<Coding> {
        let v = trim(value);
        if v.is_empty() || v.eq_ignore_ascii_case(b"identity") {
            Some(Coding::Identity)
        } else if v.eq_ignore_ascii_case(b"gzip") || v.eq_ignore_ascii_case(b"x-gzip") {
            Some(Coding::Gzip)
        } else if v.eq_ignore_ascii_case(b"br") {
            Some(Coding::Br)
        } else if v.eq_ignore_ascii_case(b"zstd") {
            Some(Coding::Zstd)
        } else {
            None
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What one request accepts: a q-value (0–1000) per coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepts {
    q: [u16; 4],
}

impl Accepts {
    /// A request without `Accept-Encoding`: RFC 9110 allows any coding, but clients that send
    /// none are scripts and old tools that expect the bytes as they are; Varnish, nginx and
    /// Apache all answer them with identity, and so does Shellac.
    pub const IDENTITY_ONLY: Accepts = Accepts { q: [1, 0, 0, 0] };

    /// Reads every `Accept-Encoding` field line of a request (none: [`IDENTITY_ONLY`]).
    ///
    /// [`IDENTITY_ONLY`]: Accepts::IDENTITY_ONLY
    pub fn parse<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Accepts {
        let mut explicit: [Option<u16>; 4] = [None; 4];
        let mut star: Option<u16> = None;
        let mut any_line = false;
        for line in lines {
            any_line = true;
            for member in line.split(|b| *b == b',') {
                let mut params = member.split(|b| *b == b';');
                let token = trim(params.next().unwrap_or_default());
                if token.is_empty() {
                    continue;
                }
                let mut q = Some(1000);
                for param in params {
                    let param = trim(param);
                    if param.len() >= 2 && param[..2].eq_ignore_ascii_case(b"q=") {
                        q = parse_qvalue(&param[2..]);
                    }
                }
                // A member whose q-value does not parse is ignored (RFC 9110's grammar has
                // no meaning for it); the others still count.
                let Some(q) = q else { continue };
                let slot = if token == b"*" {
                    &mut star
                } else {
                    match Coding::from_content_encoding(token) {
                        Some(c) => &mut explicit[c.index()],
                        _ => continue,
                    }
                };
                // Several entries for one coding: the most favourable one wins.
                *slot = Some(slot.map_or(q, |old| old.max(q)));
            }
        }
        if !any_line {
            return Accepts::IDENTITY_ONLY;
        }
        let mut q = [0u16; 4];
        for c in Coding::PREFERENCE {
            q[c.index()] = match (explicit[c.index()], c) {
                (Some(v), _) => v,
                // identity matches "*" like any coding; when neither names it, it is still
                // acceptable (§12.5.3) but after every coding the client asked for by name,
                // as Apache and nginx rank it.
                (None, Coding::Identity) => star.unwrap_or(1),
                (None, _) => star.unwrap_or(0),
            };
        }
        Accepts { q }
    }

    /// Whether the client takes `coding`.
    pub fn accepts(&self, coding: Coding) -> bool {
        self.q[coding.index()] > 0
    }

    /// The coding to send when the codings in `available` are at hand: the client's highest
    /// q-value, ties broken by [`Coding::PREFERENCE`]. `None`: nothing at hand is acceptable
    /// (RFC 9110 allows a 406 or, usually better, identity anyway).
    pub fn choose(&self, available: &[Coding]) -> Option<Coding> {
        Coding::PREFERENCE
            .into_iter()
            .filter(|c| available.contains(c) && self.accepts(*c))
            .max_by_key(|c| {
                let rank = Coding::PREFERENCE.len()
                    - Coding::PREFERENCE.iter().position(|p| p == c).unwrap_or(0);
                (self.q[c.index()], rank)
            })
    }

    /// The cache key's class: what the client gets when all four codings are at hand. Two
    /// requests with one class get the same bytes, whatever their header strings.
    pub fn class(&self) -> Coding {
        self.choose(&Coding::PREFERENCE).unwrap_or(Coding::Identity)
    }

    /// The codings other than identity the client takes, as an `Accept-Encoding` value in
    /// the server's order of preference (`None`: none of them): what a request Shellac does
    /// not store is sent upstream with, whatever its spelling.
    pub fn field(&self) -> Option<&'static str> {
        let taken = |c: Coding| usize::from(self.accepts(c));
        match taken(Coding::Zstd) << 2 | taken(Coding::Br) << 1 | taken(Coding::Gzip) {
            0b001 => Some("gzip"),
            0b010 => Some("br"),
            0b011 => Some("br, gzip"),
            0b100 => Some("zstd"),
            0b101 => Some("zstd, gzip"),
            0b110 => Some("zstd, br"),
            0b111 => Some("zstd, br, gzip"),
            _ => None,
        }
    }
}

impl Default for Accepts {
    /// As a request without `Accept-Encoding`.
    fn default() -> Accepts {
        Accepts::IDENTITY_ONLY
    }
}

/// RFC 9110 §12.4.2: `0`, `0.` and decimals, or `1`, `1.` and zeros; returned in
/// thousandths. More than the grammar's three decimals are read as Varnish and browsers
/// do: a value above zero stays above zero (`0.0000001` is the smallest, 1), never a
/// refusal.
fn parse_qvalue(v: &[u8]) -> Option<u16> {
    let v = trim(v);
    let (int, frac) = match v.iter().position(|b| *b == b'.') {
        Some(n) => (&v[..n], &v[n + 1..]),
        None => (v, &b""[..]),
    };
    if int.len() != 1 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    let beyond = frac.iter().skip(3).any(|d| *d != b'0');
    match int[0] {
        b'0' if thousandths == 0 && beyond => Some(1),
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 && !beyond => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::Coding::*;
    use super::*;

    fn class(lines: &[&str]) -> Coding {
        Accepts::parse(lines.iter().map(|l| l.as_bytes())).class()
    }

    #[test]
    fn browser_strings_fall_into_four_classes() {
        assert_eq!(class(&["gzip, deflate, br, zstd"]), Zstd); // Chrome 123+
        assert_eq!(class(&["gzip, deflate, br"]), Br); // Firefox, Safari
        assert_eq!(class(&["gzip, deflate"]), Gzip); // older clients, curl --compressed
        assert_eq!(class(&["deflate"]), Identity);
        assert_eq!(class(&[]), Identity);
        assert_eq!(class(&[""]), Identity);
        assert_eq!(class(&["x-gzip"]), Gzip);
        assert_eq!(class(&["GZIP"]), Gzip);
    }

    #[test]
    fn q_values_order_and_refuse() {
        assert_eq!(class(&["br;q=0.5, gzip"]), Gzip);
        assert_eq!(class(&["br;q=1.0, gzip;q=0.999"]), Br);
        assert_eq!(class(&["zstd;q=0, br;q=0"]), Identity);
        assert_eq!(class(&["*"]), Zstd);
        assert_eq!(class(&["*;q=0.1, gzip;q=0.2"]), Gzip);
        assert_eq!(
            class(&["gzip;q=0.5", "br"]),
            Br,
            "several field lines are one list"
        );
        assert_eq!(
            class(&["gzip;q=0.5"]),
            Gzip,
            "identity ranks after codings named"
        );
        assert_eq!(class(&["gzip;q=0.5, identity"]), Identity);
        // An unreadable q-value drops its member only.
        assert_eq!(class(&["br;q=2, gzip"]), Gzip);
        assert_eq!(class(&["br;q=-1, gzip;q=0.1"]), Gzip);
        // Decimals past the third are read, not refused (as Varnish reads them).
        assert_eq!(class(&["br;q=0.1004, gzip;q=0.1"]), Br);
        assert_eq!(class(&["gzip;q=0.0000001"]), Gzip);
    }

    #[test]
    fn identity_is_refused_only_by_name_or_by_star_q0() {
        let a = Accepts::parse([&b"gzip, *;q=0"[..]]);
        assert!(!a.accepts(Identity));
        assert_eq!(a.choose(&[Identity]), None);
        let a = Accepts::parse([&b"gzip, identity;q=0"[..]]);
        assert!(!a.accepts(Identity));
        let a = Accepts::parse([&b"gzip, *;q=0, identity"[..]]);
        assert!(a.accepts(Identity));
        assert!(Accepts::parse([&b"br"[..]]).accepts(Identity));
    }

    #[test]
    fn choose_takes_what_is_at_hand() {
        let chrome = Accepts::parse([&b"gzip, deflate, br, zstd"[..]]);
        assert_eq!(chrome.choose(&[Identity, Gzip]), Some(Gzip));
        assert_eq!(chrome.choose(&[Identity]), Some(Identity));
        let old = Accepts::parse([&b"gzip"[..]]);
        assert_eq!(old.choose(&[Zstd, Br, Identity]), Some(Identity));
    }

    #[test]
    fn qvalue_grammar() {
        for (v, q) in [
            ("0", Some(0)),
            ("0.5", Some(500)),
            ("1", Some(1000)),
            ("1.000", Some(1000)),
            ("0.001", Some(1)),
            ("0.1234", Some(123)),
            ("0.0000001", Some(1)),
            ("0.0000", Some(0)),
            ("1.0000", Some(1000)),
        ] {
            assert_eq!(parse_qvalue(v.as_bytes()), q, "{v}");
        }
        for v in ["1.5", "2", ".5", "-1", "", "a", "1.001", "1.0001"] {
            assert_eq!(parse_qvalue(v.as_bytes()), None, "{v}");
        }
    }

    #[test]
    fn field_lists_what_is_taken() {
        let field = |l: &str| Accepts::parse([l.as_bytes()]).field();
        assert_eq!(field("gzip, deflate, br, zstd"), Some("zstd, br, gzip"));
        assert_eq!(field("br;q=0.5, gzip"), Some("br, gzip"));
        assert_eq!(field("deflate"), None);
        assert_eq!(field("x-gzip"), Some("gzip"));
        assert_eq!(Accepts::default().field(), None);
    }

    #[test]
    fn content_encoding_names() {
        assert_eq!(Coding::from_content_encoding(b" gzip "), Some(Gzip));
        assert_eq!(Coding::from_content_encoding(b"deflate"), None);
        assert_eq!(Coding::from_content_encoding(b"gzip, br"), None);
        assert_eq!(Coding::from_content_encoding(b""), Some(Identity));
    }
}
