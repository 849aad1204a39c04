//! `[invalidation]`: who may PURGE, and the bounds of the ban list.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units::Dur;

/// An IP network, `10.0.0.0/8` or a single address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Network {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Network {
    pub fn parse(text: &str) -> Result<Network, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("`{text}` is not an IP address or network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("`{text}`: prefix must be 0-{max}"))?,
            None => max,
        };
        Ok(Network { addr, prefix })
    }

    /// Whether `ip` is inside this network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.prefix)
                };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.prefix)
                };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let whole = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.prefix == whole {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

impl Serialize for Network {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Network::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// `[invalidation]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct InvalidationConfig {
    /// Client networks allowed to send `PURGE`. Default loopback only
    /// (`["127.0.0.0/8", "::1"]`); `[]` disables PURGE.
    #[serde(deserialize_with = "super::lists::one_or_many")]
    pub purge_from: Vec<Network>,
    /// Active bans at most; adding more fails until the sweeper retires old ones. Default 10000.
    pub max_bans: usize,
    /// How often the background sweeper walks the memory tier for banned objects. Default `10s`.
    pub ban_sweep_interval: Dur,
    /// Whether a passed or piped unsafe request (POST, PUT, DELETE, ...) answered 2xx/3xx
    /// evicts the URLs it may have changed (RFC 9111 §4.4). Unset: yes under `[[rule]]`s, no
    /// under `[vcl]` (Varnish changes the cache only where the VCL purges or bans).
    pub unsafe_requests_invalidate: Option<bool>,
}

/// Active bans at most, unless configured otherwise.
pub const DEFAULT_MAX_BANS: usize = 10_000;

impl Default for InvalidationConfig {
    fn default() -> Self {
        InvalidationConfig {
            purge_from: vec![
                Network {
                    addr: IpAddr::from([127, 0, 0, 0]),
                    prefix: 8,
                },
                Network {
                    addr: "::1".parse().expect("loopback"),
                    prefix: 128,
                },
            ],
            max_bans: DEFAULT_MAX_BANS,
            ban_sweep_interval: Dur(Duration::from_secs(10)),
            unsafe_requests_invalidate: None,
        }
    }
}

impl InvalidationConfig {
    pub fn may_purge(&self, ip: IpAddr) -> bool {
        self.purge_from.iter().any(|n| n.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks() {
        let n = Network::parse("10.1.0.0/16").unwrap();
        assert!(n.contains("10.1.2.3".parse().unwrap()));
        assert!(!n.contains("10.2.0.1".parse().unwrap()));
        assert!(n.contains("::ffff:10.1.9.9".parse().unwrap()));
        assert!(
            Network::parse("::1")
                .unwrap()
                .contains("::1".parse().unwrap())
        );
        assert!(
            Network::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        assert!(Network::parse("10.0.0.0/33").is_err());
        assert!(Network::parse("example.com").is_err());
        assert!(InvalidationConfig::default().may_purge("127.0.0.1".parse().unwrap()));
        assert!(!InvalidationConfig::default().may_purge("192.0.2.1".parse().unwrap()));
    }
}
