//! BLOB values: vmod_blob's binary-to-text schemes (`blob.decode`, `blob.encode`); a
//! `:base64:` literal's bytes are `http::base64::decode_base64`'s.

/// vmod_blob's binary-to-text schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Identity,
    Base64,
    Base64Url,
    Base64UrlNoPad,
    Base64Cf,
    Hex,
    Url,
}

impl Scheme {
    /// The scheme an ENUM value names (`HEX`, ...).
    pub fn by_name(name: &str) -> Option<Scheme> {
        Some(match name {
            "IDENTITY" => Scheme::Identity,
            "BASE64" => Scheme::Base64,
            "BASE64URL" => Scheme::Base64Url,
            "BASE64URLNOPAD" => Scheme::Base64UrlNoPad,
            "BASE64CF" => Scheme::Base64Cf,
            "HEX" => Scheme::Hex,
            "URL" => Scheme::Url,
            _ => return None,
        })
    }

    /// The 64 characters and the padding of a base64 scheme.
    fn alphabet(self) -> Option<(&'static [u8; 64], Option<u8>)> {
        const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        const CF: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-~";
        Some(match self {
            Scheme::Base64 => (STD, Some(b'=')),
            Scheme::Base64Url => (URL, Some(b'=')),
            Scheme::Base64UrlNoPad => (URL, None),
            Scheme::Base64Cf => (CF, Some(b'_')),
            _ => return None,
        })
    }
}

/// `blob.encode(encoding, case, blob)`: `case` is `LOWER`, `UPPER` or `DEFAULT` (lower for
/// HEX and URL; the only one the other schemes take). IDENTITY gives the bytes up to the
/// first NUL (a VCL string ends there), which must be text.
pub fn encode(scheme: Scheme, case: &str, bytes: &[u8]) -> Result<String, String> {
    let upper = case == "UPPER";
    if case != "DEFAULT" && !matches!(scheme, Scheme::Hex | Scheme::Url) {
        return Err(format!("case={case} is only for the HEX and URL encodings"));
    }
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    Ok(match scheme {
        Scheme::Identity => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            String::from_utf8(bytes[..end].to_vec())
                .map_err(|_| "IDENTITY encoding of bytes that are not text".to_string())?
        }
        Scheme::Hex => {
            let mut out = String::with_capacity(bytes.len() * 2);
            for &b in bytes {
                out.push(digits[(b >> 4) as usize] as char);
                out.push(digits[(b & 15) as usize] as char);
            }
            out
        }
        Scheme::Url => {
            let mut out = String::with_capacity(bytes.len());
            for &b in bytes {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    out.push(b as char);
                } else {
                    out.push('%');
                    out.push(digits[(b >> 4) as usize] as char);
                    out.push(digits[(b & 15) as usize] as char);
                }
            }
            out
        }
        base64 => {
            let Some((alphabet, pad)) = base64.alphabet() else {
                return Err("unknown encoding".to_string());
            };
            let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
            for chunk in bytes.chunks(3) {
                let n = chunk
                    .iter()
                    .enumerate()
                    .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
                for i in 0..=chunk.len() {
                    out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
                }
                if let Some(p) = pad {
                    for _ in chunk.len()..3 {
                        out.push(p as char);
                    }
                }
            }
            out
        }
    })
}

/// `blob.decode(decoding, length, encoded)`: the bytes `text` (its first `length` characters
/// when `length` > 0) encodes, or why it is not that encoding.
pub fn decode(scheme: Scheme, text: &str, length: i64) -> Result<Vec<u8>, String> {
    let text = match usize::try_from(length) {
        Ok(n) if n > 0 && n < text.len() => text.get(..n).ok_or("length splits a character")?,
        _ => text,
    };
    let hex = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    match scheme {
        Scheme::Identity => Ok(text.as_bytes().to_vec()),
        Scheme::Hex => {
            let digits: Vec<u8> = text
                .bytes()
                .map(|c| hex(c).ok_or_else(|| format!("{:?} is not a hex digit", c as char)))
                .collect::<Result<_, _>>()?;
            // An odd count decodes as if a 0 came first.
            let odd = digits.len() % 2;
            let mut out = Vec::with_capacity(digits.len() / 2 + odd);
            if odd == 1 {
                out.push(digits[0]);
            }
            for pair in digits[odd..].chunks(2) {
                out.push(pair[0] << 4 | pair[1]);
            }
            Ok(out)
        }
        Scheme::Url => {
            let b = text.as_bytes();
            let mut out = Vec::with_capacity(b.len());
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'%' {
                    let (Some(h), Some(l)) = (
                        b.get(i + 1).copied().and_then(hex),
                        b.get(i + 2).copied().and_then(hex),
                    ) else {
                        return Err("'%' not followed by two hex digits".to_string());
                    };
                    out.push(h << 4 | l);
                    i += 3;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            Ok(out)
        }
        base64 => {
            let Some((alphabet, pad)) = base64.alphabet() else {
                return Err("unknown decoding".to_string());
            };
            let data = match pad {
                Some(p) => text.trim_end_matches(p as char),
                None => text,
            };
            let mut out = Vec::with_capacity(data.len() * 3 / 4);
            let (mut n, mut bits) = (0u32, 0);
            for c in data.bytes() {
                let Some(v) = alphabet.iter().position(|&a| a == c) else {
                    return Err(format!("{:?} is not in the encoding's alphabet", c as char));
                };
                n = (n << 6) | v as u32;
                bits += 6;
                if bits >= 8 {
                    bits -= 8;
                    out.push((n >> bits) as u8);
                }
            }
            Ok(out)
        }
    }
}

/// A BLOB written as a string: RFC 8941's byte sequence, `:` base64 `:`.
pub fn as_text(bytes: &[u8]) -> String {
    let inner = encode(Scheme::Base64, "DEFAULT", bytes).unwrap_or_default();
    format!(":{inner}:")
}

#[cfg(test)]
mod scheme_tests {
    use super::*;

    #[test]
    fn encodes_and_decodes_every_scheme_as_vmod_blob() {
        let data = b"foo\xfb\xff?";
        for s in [
            Scheme::Base64,
            Scheme::Base64Url,
            Scheme::Base64UrlNoPad,
            Scheme::Base64Cf,
            Scheme::Hex,
            Scheme::Url,
        ] {
            let text = encode(s, "DEFAULT", data).unwrap();
            assert_eq!(decode(s, &text, 0).unwrap(), data, "{s:?} {text}");
        }
        assert_eq!(
            encode(Scheme::Base64, "DEFAULT", b"foobar").unwrap(),
            "Zm9vYmFy"
        );
        assert_eq!(encode(Scheme::Base64, "DEFAULT", b"fo").unwrap(), "Zm8=");
        assert_eq!(
            encode(Scheme::Base64UrlNoPad, "DEFAULT", b"fo").unwrap(),
            "Zm8"
        );
        assert_eq!(
            encode(Scheme::Base64Cf, "DEFAULT", b"\xfb\xff").unwrap(),
            "-~8_"
        );
        assert_eq!(encode(Scheme::Hex, "UPPER", b"\xab\x01").unwrap(), "AB01");
        assert_eq!(
            encode(Scheme::Url, "DEFAULT", b"a b/~").unwrap(),
            "a%20b%2f~"
        );
        assert_eq!(
            decode(Scheme::Hex, "abcdef0", 0).unwrap(),
            b"\x0a\xbc\xde\xf0"
        );
        assert_eq!(decode(Scheme::Base64, "Zm9vYmFyYmF6", 4).unwrap(), b"foo");
        assert_eq!(
            encode(Scheme::Identity, "DEFAULT", b"foo\0bar").unwrap(),
            "foo"
        );
        assert!(encode(Scheme::Base64, "UPPER", b"x").is_err());
        assert!(decode(Scheme::Hex, "0x12", 0).is_err());
        assert_eq!(as_text(b"fo"), ":Zm8=:");
    }
}
