//! A list setting given as one value is a list of one: `listen = "0.0.0.0:80"` means
//! `listen = ["0.0.0.0:80"]` (`#[serde(deserialize_with = "lists::one_or_many")]`).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IntoDeserializer, SeqAccess, Visitor};

/// A list, or one element of it.
pub fn one_or_many<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    d.deserialize_any(OneOrMany(PhantomData))
}

/// An optional list, or one element of it (a key not given is `None`).
pub fn opt_one_or_many<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    one_or_many(d).map(Some)
}

struct OneOrMany<T>(PhantomData<T>);

impl<T> OneOrMany<T> {
    fn one<'de, E: de::Error>(value: impl IntoDeserializer<'de, E>) -> Result<Vec<T>, E>
    where
        T: Deserialize<'de>,
    {
        T::deserialize(value.into_deserializer()).map(|v| vec![v])
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for OneOrMany<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            out.push(item);
        }
        Ok(out)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<T>, E> {
        Self::one(v.to_string())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Vec<T>, E> {
        Self::one(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<T>, E> {
        Self::one(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<T>, E> {
        Self::one(v)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<T>, E> {
        Self::one(v)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Vec<T>, E> {
        Self::one(v)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Vec<T>, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|v| vec![v])
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    #[derive(serde::Deserialize)]
    struct T {
        #[serde(deserialize_with = "one_or_many")]
        a: Vec<SocketAddr>,
        #[serde(deserialize_with = "one_or_many")]
        s: Vec<u16>,
    }

    #[test]
    fn one_is_a_list_of_one() {
        let t: T = toml::from_str("a = \"127.0.0.1:80\"\ns = 503").unwrap();
        assert_eq!(t.a, vec!["127.0.0.1:80".parse::<SocketAddr>().unwrap()]);
        assert_eq!(t.s, vec![503]);
        let t: T = toml::from_str("a = [\"127.0.0.1:80\", \"[::1]:81\"]\ns = []").unwrap();
        assert_eq!(t.a.len(), 2);
        assert!(t.s.is_empty());
        assert!(toml::from_str::<T>("a = \"nope\"\ns = 1").is_err());
        assert!(toml::from_str::<T>("a = []\ns = 70000").is_err());
    }
}
