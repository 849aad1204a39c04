//! What Shellac reads from an X.509 certificate itself: its names (subject alternative DNS
//! names and IP addresses, the subject's common name), its validity window and its subject
//! as text (RFC 4514). rustls and webpki verify certificates; they do not expose these.
//!
//! A small, bounds-checked DER reader: any malformed input is an error, never a panic, and
//! only the fields above are interpreted.

use std::fmt::Write as _;

/// What a certificate says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFacts {
    /// Subject alternative DNS names (lower-cased), else the subject's common name.
    pub dns_names: Vec<String>,
    /// Subject alternative IP addresses.
    pub ip_addresses: Vec<std::net::IpAddr>,
    /// The subject, RFC 4514 (most specific first): `CN=alice,O=Example,C=FR`.
    pub subject: String,
    pub issuer: String,
    /// Seconds since the Unix epoch.
    pub not_before: i64,
    pub not_after: i64,
}

/// A DER element: its tag and its contents.
#[derive(Clone, Copy)]
struct Tlv<'a> {
    tag: u8,
    value: &'a [u8],
}

/// Reads elements one after another from a byte string.
struct Reader<'a> {
    rest: &'a [u8],
}

type Result<T> = std::result::Result<T, &'static str>;

impl<'a> Reader<'a> {
    fn new(rest: &'a [u8]) -> Self {
        Reader { rest }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    fn next(&mut self) -> Result<Tlv<'a>> {
        let (&tag, rest) = self.rest.split_first().ok_or("truncated")?;
        if tag & 0x1f == 0x1f {
            return Err("multi-byte tag");
        }
        let (&first, mut rest) = rest.split_first().ok_or("truncated")?;
        let len = if first < 0x80 {
            first as usize
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 || rest.len() < n {
                return Err("bad length");
            }
            let mut len = 0usize;
            for &b in &rest[..n] {
                len = (len << 8) | b as usize;
            }
            rest = &rest[n..];
            len
        };
        if rest.len() < len {
            return Err("truncated");
        }
        let (value, rest) = rest.split_at(len);
        self.rest = rest;
        Ok(Tlv { tag, value })
    }

    fn expect(&mut self, tag: u8) -> Result<&'a [u8]> {
        let t = self.next()?;
        if t.tag != tag {
            return Err("unexpected element");
        }
        Ok(t.value)
    }
}

const INTEGER: u8 = 0x02;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const SAN_OID: &[u8] = &[0x55, 0x1d, 0x11];

/// Reads the facts from a DER certificate.
pub fn parse(der: &[u8]) -> std::result::Result<CertFacts, String> {
    facts(der).map_err(|e| format!("not a valid X.509 certificate ({e})"))
}

fn facts(der: &[u8]) -> Result<CertFacts> {
    let cert = Reader::new(der).expect(SEQUENCE)?;
    let mut tbs = Reader::new(Reader::new(cert).expect(SEQUENCE)?);
    if tbs.peek_tag() == Some(0xa0) {
        tbs.next()?; // version
    }
    tbs.next()?; // serial number
    tbs.expect(SEQUENCE)?; // signature algorithm
    let issuer = name(tbs.expect(SEQUENCE)?)?;
    let mut validity = Reader::new(tbs.expect(SEQUENCE)?);
    let not_before = time(validity.next()?)?;
    let not_after = time(validity.next()?)?;
    let subject_der = tbs.expect(SEQUENCE)?;
    let subject = name(subject_der)?;
    tbs.expect(SEQUENCE)?; // subject public key info
    let mut dns_names = Vec::new();
    let mut ip_addresses = Vec::new();
    while !tbs.is_empty() {
        let t = tbs.next()?;
        if t.tag != 0xa3 {
            continue; // issuer / subject unique IDs
        }
        let mut exts = Reader::new(Reader::new(t.value).expect(SEQUENCE)?);
        while !exts.is_empty() {
            let mut ext = Reader::new(exts.expect(SEQUENCE)?);
            let oid = ext.expect(OID)?;
            let mut value = ext.next()?;
            if value.tag == 0x01 {
                value = ext.next()?; // critical
            }
            if value.tag != OCTET_STRING || oid != SAN_OID {
                continue;
            }
            let mut names = Reader::new(Reader::new(value.value).expect(SEQUENCE)?);
            while !names.is_empty() {
                let n = names.next()?;
                match n.tag {
                    0x82 => {
                        let s = std::str::from_utf8(n.value).map_err(|_| "bad dNSName")?;
                        dns_names.push(s.to_ascii_lowercase());
                    }
                    0x87 => match n.value.len() {
                        4 => ip_addresses
                            .push(<[u8; 4]>::try_from(n.value).map_err(|_| "ip")?.into()),
                        16 => ip_addresses
                            .push(<[u8; 16]>::try_from(n.value).map_err(|_| "ip")?.into()),
                        _ => return Err("bad iPAddress"),
                    },
                    _ => {}
                }
            }
        }
    }
    if dns_names.is_empty()
        && ip_addresses.is_empty()
        && let Some(cn) = common_name(subject_der)?
    {
        dns_names.push(cn.to_ascii_lowercase());
    }
    Ok(CertFacts {
        dns_names,
        ip_addresses,
        subject,
        issuer,
        not_before,
        not_after,
    })
}

/// What a certificate revocation list (RFC 5280 §5) says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrlFacts {
    /// The CA that issued it, RFC 4514.
    pub issuer: String,
    /// Seconds since the Unix epoch.
    pub this_update: i64,
    /// When the next list is due (seconds since the epoch); `None` when the list names none.
    pub next_update: Option<i64>,
    /// How many certificates it revokes.
    pub revoked: usize,
}

/// Reads the facts from a DER certificate revocation list.
pub fn parse_crl(der: &[u8]) -> std::result::Result<CrlFacts, String> {
    crl_facts(der).map_err(|e| format!("not a valid certificate revocation list ({e})"))
}

fn crl_facts(der: &[u8]) -> Result<CrlFacts> {
    let list = Reader::new(der).expect(SEQUENCE)?;
    let mut tbs = Reader::new(Reader::new(list).expect(SEQUENCE)?);
    if tbs.peek_tag() == Some(INTEGER) {
        tbs.next()?; // version
    }
    tbs.expect(SEQUENCE)?; // signature algorithm
    let issuer = name(tbs.expect(SEQUENCE)?)?;
    let this_update = time(tbs.next()?)?;
    let mut next_update = None;
    let mut revoked = 0;
    while !tbs.is_empty() {
        let t = tbs.next()?;
        match t.tag {
            UTC_TIME | GENERALIZED_TIME if next_update.is_none() && revoked == 0 => {
                next_update = Some(time(t)?);
            }
            SEQUENCE => {
                let mut entries = Reader::new(t.value);
                while !entries.is_empty() {
                    entries.expect(SEQUENCE)?;
                    revoked += 1;
                }
            }
            _ => {} // extensions
        }
    }
    Ok(CrlFacts {
        issuer,
        this_update,
        next_update,
        revoked,
    })
}

/// Attribute short names (RFC 4514 and common practice), by OID contents.
const ATTRIBUTES: &[(&[u8], &str)] = &[
    (&[0x55, 0x04, 0x03], "CN"),
    (&[0x55, 0x04, 0x05], "serialNumber"),
    (&[0x55, 0x04, 0x06], "C"),
    (&[0x55, 0x04, 0x07], "L"),
    (&[0x55, 0x04, 0x08], "ST"),
    (&[0x55, 0x04, 0x09], "STREET"),
    (&[0x55, 0x04, 0x0a], "O"),
    (&[0x55, 0x04, 0x0b], "OU"),
    (
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01],
        "emailAddress",
    ),
    (
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19],
        "DC",
    ),
    (
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01],
        "UID",
    ),
];

/// A Name as RFC 4514 text: RDNs in reverse order, separated by `,` (multi-valued ones by
/// `+`); unknown attributes by dotted OID, values that are not strings as `#hex`.
fn name(der: &[u8]) -> Result<String> {
    let mut rdns = Vec::new();
    let mut seq = Reader::new(der);
    while !seq.is_empty() {
        let mut set = Reader::new(seq.expect(SET)?);
        let mut parts = Vec::new();
        while !set.is_empty() {
            let mut atv = Reader::new(set.expect(SEQUENCE)?);
            let oid = atv.expect(OID)?;
            let value = atv.next()?;
            let key = ATTRIBUTES
                .iter()
                .find(|(o, _)| *o == oid)
                .map(|(_, n)| n.to_string())
                .unwrap_or_else(|| dotted(oid));
            let text = match string(value) {
                Some(s) => escape(&s),
                None => {
                    // `#` and the hex of the element (RFC 4514 §2.4), short ones only.
                    let mut hex = String::from("#");
                    let len = u8::try_from(value.value.len()).unwrap_or(0);
                    let _ = write!(hex, "{:02x}{len:02x}", value.tag);
                    for b in value.value.iter().take(127) {
                        let _ = write!(hex, "{b:02x}");
                    }
                    hex
                }
            };
            parts.push(format!("{key}={text}"));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

/// The subject's (last) common name, if any.
fn common_name(der: &[u8]) -> Result<Option<String>> {
    let mut found = None;
    let mut seq = Reader::new(der);
    while !seq.is_empty() {
        let mut set = Reader::new(seq.expect(SET)?);
        while !set.is_empty() {
            let mut atv = Reader::new(set.expect(SEQUENCE)?);
            if atv.expect(OID)? == [0x55, 0x04, 0x03] {
                found = string(atv.next()?);
            }
        }
    }
    Ok(found)
}

/// A directory string's text (UTF8String, PrintableString, IA5String, T61String taken as
/// Latin-1, BMPString as UTF-16).
fn string(t: Tlv<'_>) -> Option<String> {
    match t.tag {
        0x0c | 0x13 | 0x16 | 0x12 | 0x1a => std::str::from_utf8(t.value).ok().map(str::to_string),
        0x14 => Some(t.value.iter().map(|&b| b as char).collect()),
        0x1e if t.value.len().is_multiple_of(2) => {
            let units: Vec<u16> = t
                .value
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// RFC 4514 §2.4 escaping (and control characters as `\XX`, so a log line stays one line).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let last = s.chars().count().saturating_sub(1);
    for (i, c) in s.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\{b:02X}");
            }
        } else {
            if special {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

fn dotted(oid: &[u8]) -> String {
    let mut parts: Vec<u64> = Vec::new();
    let mut acc: u64 = 0;
    for &b in oid {
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if parts.is_empty() {
                let first = (acc / 40).min(2);
                parts.push(first);
                parts.push(acc - first * 40);
            } else {
                parts.push(acc);
            }
            acc = 0;
        }
        if acc > u64::MAX >> 8 {
            return "unknown".into();
        }
    }
    parts
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

/// UTCTime or GeneralizedTime (as RFC 5280 §4.1.2.5 allows them: `Z`, seconds given) in
/// seconds since the epoch.
fn time(t: Tlv<'_>) -> Result<i64> {
    let digits = |s: &[u8]| -> Result<i64> {
        s.iter().try_fold(0i64, |acc, &b| {
            if b.is_ascii_digit() {
                Ok(acc * 10 + i64::from(b - b'0'))
            } else {
                Err("bad time")
            }
        })
    };
    let (year, rest) = match t.tag {
        UTC_TIME if t.value.len() == 13 => {
            let yy = digits(&t.value[..2])?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &t.value[2..])
        }
        GENERALIZED_TIME if t.value.len() == 15 => (digits(&t.value[..4])?, &t.value[4..]),
        _ => return Err("bad time"),
    };
    if rest.last() != Some(&b'Z') {
        return Err("bad time");
    }
    let month = digits(&rest[0..2])?;
    let day = digits(&rest[2..4])?;
    let (h, m, s) = (
        digits(&rest[4..6])?,
        digits(&rest[6..8])?,
        digits(&rest[8..10])?,
    );
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return Err("bad time");
    }
    Ok(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn times() {
        let utc = Tlv {
            tag: UTC_TIME,
            value: b"491231235959Z",
        };
        assert_eq!(
            time(utc),
            Ok(days_from_civil(2049, 12, 31) * 86_400 + 86_399)
        );
        let gen_time = Tlv {
            tag: GENERALIZED_TIME,
            value: b"20500101000000Z",
        };
        assert_eq!(time(gen_time), Ok(days_from_civil(2050, 1, 1) * 86_400));
        let bad = Tlv {
            tag: UTC_TIME,
            value: b"4912312359",
        };
        assert!(time(bad).is_err());
    }

    #[test]
    fn escaping_and_oids() {
        assert_eq!(escape("a,b"), "a\\,b");
        assert_eq!(escape(" x "), "\\ x\\ ");
        assert_eq!(escape("line\nbreak"), "line\\0Abreak");
        assert_eq!(dotted(&[0x2a, 0x86, 0x48]), "1.2.840");
    }

    /// Every prefix and one-byte change of a real certificate parses or errs, never panics.
    #[test]
    fn hostile_input_never_panics() {
        let mut params = rcgen::CertificateParams::new(vec!["a.example".into()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice, \"the\" admin");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example");
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress(std::net::IpAddr::from([
                127, 0, 0, 1,
            ])));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let der = cert.der().to_vec();
        let facts = parse(&der).unwrap();
        assert_eq!(facts.dns_names, ["a.example"]);
        assert_eq!(facts.ip_addresses, [std::net::IpAddr::from([127, 0, 0, 1])]);
        assert_eq!(facts.subject, "O=Example,CN=alice\\, \\\"the\\\" admin");
        assert!(facts.not_after > facts.not_before);
        for n in 0..der.len() {
            let _ = parse(&der[..n]);
        }
        for i in 0..der.len() {
            let mut d = der.clone();
            d[i] ^= 0xff;
            let _ = parse(&d);
        }
    }
}
