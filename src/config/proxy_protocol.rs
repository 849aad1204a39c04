//! `server.proxy_protocol` and `server.proxy_protocol_from`: the client listeners whose
//! connections start with a PROXY protocol header (a load balancer or TLS terminator in
//! front), and the networks such a header is believed from (docs/sites.md, SECURITY.md).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// `server.proxy_protocol`: on which client listeners a header is required.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ProxyProtocol {
    /// `false`: on none.
    #[default]
    Off,
    /// `true`: on every client listener (`server.listen` and every `[[tls]]`'s `listen`).
    All,
    /// A list: on the listeners configured with these addresses (each one of `server.listen`
    /// or of a `[[tls]]`'s `listen`, checked in config/validate/listeners.rs).
    Only(Vec<SocketAddr>),
}

impl ProxyProtocol {
    /// Whether the listener configured as `listen` requires a header.
    pub fn on(&self, listen: SocketAddr) -> bool {
        match self {
            ProxyProtocol::Off => false,
            ProxyProtocol::All => true,
            ProxyProtocol::Only(list) => list.contains(&listen),
        }
    }

    pub fn is_off(&self) -> bool {
        *self == ProxyProtocol::Off
    }
}

/// Whether `peer` may send a header (`server.proxy_protocol_from`).
pub fn trusted(from: &[super::invalidation::Network], peer: IpAddr) -> bool {
    from.iter().any(|n| n.contains(peer))
}

impl Serialize for ProxyProtocol {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ProxyProtocol::Off => s.serialize_bool(false),
            ProxyProtocol::All => s.serialize_bool(true),
            ProxyProtocol::Only(list) => {
                let mut seq = s.serialize_seq(Some(list.len()))?;
                for a in list {
                    seq.serialize_element(&a.to_string())?;
                }
                seq.end()
            }
        }
    }
}

fn address<E: de::Error>(v: &str) -> Result<SocketAddr, E> {
    v.parse()
        .map_err(|_| E::custom("invalid socket address syntax"))
}

impl<'de> Deserialize<'de> for ProxyProtocol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ProxyProtocol, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProxyProtocol;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("true, false, or a list of client listener addresses")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<ProxyProtocol, E> {
                Ok(if on {
                    ProxyProtocol::All
                } else {
                    ProxyProtocol::Off
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ProxyProtocol, E> {
                address(v).map(|a| ProxyProtocol::Only(vec![a]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ProxyProtocol, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    out.push(address(&item)?);
                }
                Ok(ProxyProtocol::Only(out))
            }
        }
        d.deserialize_any(V)
    }
}
