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
    /// or of a `[[tls]]`'s `listen`, checked in [`validate`]).
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

/// Problems, as (key path, problem): every listed address must be a client listener's, as
/// written in `server.listen` or a `[[tls]]`'s `listen`; a header required anywhere needs
/// networks to believe it from.
pub(super) fn validate(c: &super::Config) -> Vec<(Vec<String>, String)> {
    let server = &c.server;
    let mut out = Vec::new();
    if let ProxyProtocol::Only(list) = &server.proxy_protocol {
        for (i, a) in list.iter().enumerate() {
            if server.listen.contains(a) || c.tls.iter().any(|t| t.listen.contains(a)) {
                continue;
            }
            let mut all: Vec<String> = server.listen.iter().map(|l| l.to_string()).collect();
            all.extend(
                c.tls
                    .iter()
                    .flat_map(|t| t.listen.iter().map(|l| l.to_string())),
            );
            out.push((
                vec!["server".into(), "proxy_protocol".into(), i.to_string()],
                format!(
                    "{a} is not a client listener ({}): proxy_protocol names listeners as server.listen or a [[tls]]'s listen writes them",
                    all.join(", ")
                ),
            ));
        }
    }
    if !server.proxy_protocol.is_off() && server.proxy_protocol_from.is_empty() {
        out.push((
            vec!["server".into(), "proxy_protocol_from".into()],
            "proxy_protocol is on but no network may send the header: list the load balancers' networks (e.g. [\"10.0.0.0/8\"]); a header from anyone else would let any client choose its own address".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn errors(text: &str) -> Vec<String> {
        match Config::parse(text, "t.toml") {
            Ok(_) => Vec::new(),
            Err(errs) => errs
                .iter()
                .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
                .collect(),
        }
    }

    const HEAD: &str = "[server]\nlisten = [\"0.0.0.0:80\", \"127.0.0.1:8080\"]\n";
    const TAIL: &str = "\n[[tls]]\nlisten = \"0.0.0.0:443\"\ncertificate = [{ cert = \"a.pem\", key = \"a.key\" }]\n\n[[backend]]\nhost = \"b\"\nport = 80\n";

    #[test]
    fn listeners_of_either_kind_and_trusted_networks() {
        let text = format!(
            "{HEAD}proxy_protocol = [\"0.0.0.0:80\", \"0.0.0.0:443\"]\nproxy_protocol_from = [\"10.0.0.0/8\"]\n{TAIL}"
        );
        let c = Config::parse(&text, "t.toml").unwrap();
        assert!(c.server.proxy_protocol.on("0.0.0.0:80".parse().unwrap()));
        assert!(c.server.proxy_protocol.on("0.0.0.0:443".parse().unwrap()));
        assert!(
            !c.server
                .proxy_protocol
                .on("127.0.0.1:8080".parse().unwrap())
        );
        assert!(super::trusted(
            &c.server.proxy_protocol_from,
            "10.1.2.3".parse().unwrap()
        ));
        assert!(!super::trusted(
            &c.server.proxy_protocol_from,
            "192.0.2.1".parse().unwrap()
        ));
        let all = format!("{HEAD}proxy_protocol = true\nproxy_protocol_from = \"::1\"\n{TAIL}");
        let c = Config::parse(&all, "t.toml").unwrap();
        assert!(
            c.server
                .proxy_protocol
                .on("127.0.0.1:8080".parse().unwrap())
        );
        assert!(
            !crate::config::ServerConfig::default()
                .proxy_protocol
                .on("127.0.0.1:6081".parse().unwrap())
        );
    }

    #[test]
    fn unknown_listeners_and_no_trusted_network_are_errors() {
        let text = format!(
            "{HEAD}proxy_protocol = [\"0.0.0.0:81\"]\nproxy_protocol_from = [\"10.0.0.0/8\"]\n{TAIL}"
        );
        let errs = errors(&text);
        assert!(
            errs.iter()
                .any(|e| e.starts_with("3:server.proxy_protocol.0:")
                    && e.contains("0.0.0.0:81 is not a client listener")),
            "{errs:?}"
        );
        let errs = errors(&format!("{HEAD}proxy_protocol = true\n{TAIL}"));
        assert!(
            errs.iter().any(|e| e.contains("server.proxy_protocol_from")
                && e.contains("no network may send the header")),
            "{errs:?}"
        );
    }
}
