//! `[[site]] cache_share`: the bytes a site's objects may take in the memory tier, written as
//! a size (`"64MiB"`) or as a share of `cache.memory_size` (`"25%"`).

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use super::units::{parse_size, size_from_int, size_text};

/// Sites one configuration may have: the memory tier keeps an account for each site name seen
/// since start (`cache/shares.rs`), this many and one for requests of no site.
pub const MAX_SITES: usize = 4095;

/// A site's share of the memory tier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheShare {
    /// So many bytes.
    Bytes(u64),
    /// Percent of `cache.memory_size`, above 0 and at most 100.
    Percent(f64),
}

impl CacheShare {
    /// Bytes of a memory tier of `memory_size` bytes.
    pub fn bytes(self, memory_size: u64) -> u64 {
        match self {
            CacheShare::Bytes(b) => b,
            CacheShare::Percent(p) => (memory_size as f64 * p / 100.0) as u64,
        }
    }

    fn parse(text: &str) -> Result<CacheShare, String> {
        let text = text.trim();
        let Some(number) = text.strip_suffix('%') else {
            return match parse_size(text)? {
                0 => Err("a share of 0 bytes would keep nothing: write `cache = false`".into()),
                b => Ok(CacheShare::Bytes(b)),
            };
        };
        match number.trim().parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 100.0 => Ok(CacheShare::Percent(p)),
            _ => Err(format!(
                "`{text}`: a share of cache.memory_size is a percentage above 0 and at most 100, such as \"25%\""
            )),
        }
    }
}

impl std::fmt::Display for CacheShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheShare::Bytes(b) => f.write_str(&size_text(*b)),
            CacheShare::Percent(p) => write!(f, "{p}%"),
        }
    }
}

struct Visitor;

impl de::Visitor<'_> for Visitor {
    type Value = CacheShare;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a size such as \"64MiB\", or a share of cache.memory_size such as \"25%\"")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<CacheShare, E> {
        CacheShare::parse(v).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<CacheShare, E> {
        match size_from_int(v).map_err(E::custom)? {
            0 => Err(E::custom(
                "a share of 0 bytes would keep nothing: write `cache = false`",
            )),
            b => Ok(CacheShare::Bytes(b)),
        }
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<CacheShare, E> {
        self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl<'de> Deserialize<'de> for CacheShare {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CacheShare, D::Error> {
        d.deserialize_any(Visitor)
    }
}

impl Serialize for CacheShare {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_percentages() {
        assert_eq!(CacheShare::parse("64MiB"), Ok(CacheShare::Bytes(64 << 20)));
        assert_eq!(CacheShare::parse("25%"), Ok(CacheShare::Percent(25.0)));
        assert_eq!(CacheShare::parse(" 12.5 %"), Ok(CacheShare::Percent(12.5)));
        assert_eq!(CacheShare::Percent(25.0).bytes(1 << 30), 256 << 20);
        assert_eq!(CacheShare::Percent(12.5).to_string(), "12.5%");
        assert_eq!(CacheShare::Bytes(64 << 20).to_string(), "64MiB");
        for bad in ["0%", "101%", "-1%", "x%", "0", "lots"] {
            assert!(CacheShare::parse(bad).is_err(), "{bad}");
        }
    }
}
