//! `acl NAME { ... }`: address ranges, names resolved when the VCL is loaded, masks and
//! conflicting entries checked as vcc checks them.

use std::net::{IpAddr, ToSocketAddrs};

use super::super::ast::{AclEntry, Pos};
use super::super::ir;
use super::{AclSym, Checker};

impl Checker<'_> {
    pub(super) fn acl(&mut self, name: &str, flags: &[String], entries: &[AclEntry], pos: Pos) {
        let mut pedantic = false;
        for f in flags {
            match f.as_str() {
                "+pedantic" => pedantic = true,
                "-pedantic" | "+log" | "-log" | "+table" | "-table" | "+fold" | "-fold" => {}
                _ => self.error(
                    pos,
                    format!("Unknown ACL flag '{f}' (known: log, pedantic, table, fold)"),
                ),
            }
        }
        if self.redefined(name, pos) {
            return;
        }
        let mut acl = ir::Acl {
            name: name.to_string(),
            entries: Vec::new(),
        };
        for e in entries {
            let addrs: Vec<IpAddr> = match e.address.parse::<IpAddr>() {
                Ok(ip) => vec![ip],
                Err(_) => match resolve(&e.address) {
                    Some(list) => list,
                    None if e.optional => continue,
                    None => {
                        self.error(
                            e.pos,
                            format!("'{}' is not an IP address and does not resolve", e.address),
                        );
                        continue;
                    }
                },
            };
            for ip in addrs {
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let bits = match e.mask {
                    Some(m) if m > max => {
                        self.error(
                            e.pos,
                            format!(
                                "Too wide mask (/{m}) for {} address",
                                if ip.is_ipv4() { "IPv4" } else { "IPv6" }
                            ),
                        );
                        continue;
                    }
                    Some(m) => m,
                    None => max,
                };
                if pedantic && !masked_clean(ip, bits) {
                    self.error(
                        e.pos,
                        format!("Non-zero bits in masked part of {}/{bits}", e.address),
                    );
                    continue;
                }
                if let Some(prev) = acl
                    .entries
                    .iter()
                    .find(|x| x.net == ip && x.bits == bits && x.negated != e.negated)
                {
                    let _ = prev;
                    self.error(
                        e.pos,
                        format!("Conflicting ACL entries: {} and !{}", e.address, e.address),
                    );
                    continue;
                }
                acl.entries.push(ir::AclEntry {
                    net: ip,
                    bits,
                    negated: e.negated,
                });
            }
        }
        let index = self.acl_list.len() as u16;
        self.acl_list.push(acl);
        self.acls.insert(
            name.to_string(),
            AclSym {
                pos,
                index,
                used: false,
            },
        );
    }
}

/// Addresses a name resolves to (`localhost`), `None` when it does not.
pub(super) fn resolve(name: &str) -> Option<Vec<IpAddr>> {
    if name.is_empty() || name.contains(['/', ' ']) || name.contains("..") || name.ends_with('.') {
        return None;
    }
    let addrs: Vec<IpAddr> = (name, 0u16)
        .to_socket_addrs()
        .ok()?
        .map(|a| a.ip())
        .collect();
    (!addrs.is_empty()).then_some(addrs)
}

/// Whether `ip` has no bits set past its first `bits`.
fn masked_clean(ip: IpAddr, bits: u8) -> bool {
    match ip {
        IpAddr::V4(v) => bits >= 32 || u32::from(v) & (u32::MAX >> bits) == 0,
        IpAddr::V6(v) => bits >= 128 || u128::from(v) & (u128::MAX >> bits) == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert!(masked_clean("10.0.0.0".parse().unwrap(), 8));
        assert!(!masked_clean("192.168.16.255".parse().unwrap(), 24));
        assert!(masked_clean("1.2.3.4".parse().unwrap(), 32));
    }
}
