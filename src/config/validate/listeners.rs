//! Listen addresses across settings: two listeners that cannot both be bound, the admin
//! listener on a client listener's address, a backend that is Shellac itself (clashes, known
//! from the file alone), and the listeners `http2.h2c` and `server.proxy_protocol` name.
//!
//! A wildcard address (`0.0.0.0`, `[::]`) takes its port on every address of its family, and
//! `[::]` on IPv4 too (Shellac's IPv6 listeners are dual-stack), so binding a specific address
//! on that port fails. Port 0 (any free port) never clashes.

use std::net::{IpAddr, SocketAddr};

use super::problems::Problems;
use crate::config::Config;
use crate::config::http2::H2c;
use crate::config::proxy_protocol::ProxyProtocol;

/// Whether listeners on `a` and `b` cannot both be bound.
fn clash(a: SocketAddr, b: SocketAddr) -> bool {
    if a.port() == 0 || a.port() != b.port() {
        return false;
    }
    let (x, y) = (a.ip().to_canonical(), b.ip().to_canonical());
    let covers = |wild: IpAddr, other: IpAddr| match wild {
        IpAddr::V4(w) => w.is_unspecified() && other.is_ipv4(),
        IpAddr::V6(w) => w.is_unspecified(),
    };
    x == y || covers(a.ip(), y) || covers(b.ip(), x)
}

fn describe(a: SocketAddr, b: SocketAddr) -> &'static str {
    if a.ip().to_canonical() == b.ip().to_canonical() {
        "is the same address as"
    } else {
        "overlaps (a wildcard address takes the port on every address)"
    }
}

/// Whether a backend at `host:port` is one of `listen`: requests would loop through Shellac.
fn is_own_listener(host: &str, port: u16, listen: SocketAddr) -> bool {
    if listen.port() != port {
        return false;
    }
    let ip: IpAddr = match host.trim_start_matches('[').trim_end_matches(']') {
        "localhost" => IpAddr::from([127, 0, 0, 1]),
        h => match h.parse() {
            Ok(ip) => ip,
            Err(_) => return false,
        },
    };
    let ip = ip.to_canonical();
    let wildcard = listen.ip().is_unspecified();
    ip == listen.ip().to_canonical() || (wildcard && (ip.is_loopback() || ip.is_unspecified()))
}

/// (key path, problem) for every clash.
pub(super) fn clashes(c: &Config) -> Problems {
    let mut out = Vec::new();
    // Every client listener (cleartext and TLS), with its key path and how messages name it.
    let mut listen: Vec<(SocketAddr, Vec<String>, String)> = Vec::new();
    for (i, a) in c.server.listen.iter().enumerate() {
        let path = vec!["server".to_string(), "listen".into(), i.to_string()];
        listen.push((*a, path, format!("server.listen.{i}")));
    }
    for (t, tls) in c.tls.iter().enumerate() {
        for (i, a) in tls.listen.iter().enumerate() {
            let path = vec![
                "tls".to_string(),
                t.to_string(),
                "listen".into(),
                i.to_string(),
            ];
            listen.push((*a, path, format!("tls.{t}.listen.{i}")));
        }
    }
    for (i, (a, path, _)) in listen.iter().enumerate() {
        if let Some((b, _, named)) = listen[..i].iter().find(|(b, _, _)| clash(*a, *b)) {
            out.push((
                path.clone(),
                format!(
                    "{a} {} {b} ({named}): two listeners cannot share a port",
                    describe(*a, *b)
                ),
            ));
        }
    }
    if let Some(admin) = c.server.admin
        && let Some((a, _, named)) = listen.iter().find(|(a, _, _)| clash(admin, *a))
    {
        out.push((
            vec!["server".into(), "admin".into()],
            format!(
                "{admin} {} the client listener {a} ({named}); the admin listener needs an address of its own",
                describe(admin, *a)
            ),
        ));
    }
    for (i, b) in c.backends.iter().enumerate() {
        let own = listen
            .iter()
            .find(|(l, _, _)| is_own_listener(&b.host, b.port, *l))
            .map(|(l, _, named)| format!("Shellac's own client listener {l} ({named})"))
            .or_else(|| {
                c.server
                    .admin
                    .filter(|a| is_own_listener(&b.host, b.port, *a))
                    .map(|a| format!("Shellac's own admin listener {a} (server.admin)"))
            });
        if let Some(own) = own {
            out.push((
                vec!["backend".into(), i.to_string(), "port".into()],
                format!(
                    "{}:{} is {own}: requests would loop through Shellac",
                    b.host, b.port
                ),
            ));
        }
    }
    out
}

/// Problems with `h2c`'s list, as (key path, problem): every address must be a cleartext
/// listener's, as written in `server.listen`.
pub(super) fn h2c(c: &Config) -> Problems {
    let H2c::Only(list) = &c.http2.h2c else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, a) in list.iter().enumerate() {
        if c.server.listen.contains(a) {
            continue;
        }
        let tls = c.tls.iter().find(|t| t.listen.contains(a));
        let why = match tls {
            Some(t) => format!(
                "{a} is a TLS listener ([[tls]] `{}`): HTTP/2 is chosen there by ALPN (its `alpn` setting), not h2c",
                t.name
            ),
            None => {
                let listen: Vec<String> = c.server.listen.iter().map(|l| l.to_string()).collect();
                format!(
                    "{a} is not one of server.listen ({}): h2c names the cleartext listeners, as written there, that accept HTTP/2 with prior knowledge",
                    listen.join(", ")
                )
            }
        };
        out.push((vec!["http2".into(), "h2c".into(), i.to_string()], why));
    }
    out
}

/// Problems, as (key path, problem): every listed address must be a client listener's, as
/// written in `server.listen` or a `[[tls]]`'s `listen`; a header required anywhere needs
/// networks to believe it from.
pub(super) fn proxy_protocol(c: &Config) -> Problems {
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
    use super::*;
    use crate::config::ServerConfig;
    use crate::config::proxy_protocol::trusted;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn clashes() {
        assert!(clash(a("127.0.0.1:80"), a("127.0.0.1:80")));
        assert!(clash(a("0.0.0.0:80"), a("127.0.0.1:80")));
        assert!(clash(a("127.0.0.1:80"), a("0.0.0.0:80")));
        assert!(clash(a("[::]:80"), a("127.0.0.1:80")));
        assert!(clash(a("[::]:80"), a("0.0.0.0:80")));
        assert!(clash(a("[::ffff:127.0.0.1]:80"), a("127.0.0.1:80")));
        assert!(!clash(a("0.0.0.0:80"), a("[::1]:80")));
        assert!(!clash(a("127.0.0.1:80"), a("127.0.0.2:80")));
        assert!(!clash(a("127.0.0.1:80"), a("127.0.0.1:81")));
        assert!(!clash(a("127.0.0.1:0"), a("127.0.0.1:0")));
    }

    /// Issue 23 #2: the admin address equal to a listen address passed `check` and made
    /// `serve` exit with an error that did not say the clash was with its own listener.
    #[test]
    fn admin_on_a_client_listener_names_the_listener() {
        let text = "[server]\nlisten = [\"127.0.0.1:6081\", \"0.0.0.0:8080\", \"127.0.0.1:8080\"]\nadmin = \"127.0.0.1:6081\"\n\n[[backend]]\nhost = \"localhost\"\nport = 8080\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        let got: Vec<String> = errs
            .iter()
            .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
            .collect();
        assert_eq!(
            got,
            [
                "2:server.listen.2: 127.0.0.1:8080 overlaps (a wildcard address takes the port on every address) 0.0.0.0:8080 (server.listen.1): two listeners cannot share a port",
                "3:server.admin: 127.0.0.1:6081 is the same address as the client listener 127.0.0.1:6081 (server.listen.0); the admin listener needs an address of its own",
                "7:backend.0.port: localhost:8080 is Shellac's own client listener 0.0.0.0:8080 (server.listen.1): requests would loop through Shellac",
            ],
            "{errs:?}"
        );
    }

    fn errors(text: &str) -> Vec<String> {
        match Config::parse(text, "t.toml") {
            Ok(_) => Vec::new(),
            Err(errs) => errs
                .iter()
                .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
                .collect(),
        }
    }

    const H2C_HEAD: &str = "[server]\nlisten = [\"0.0.0.0:80\", \"127.0.0.1:8080\"]\n\n[[backend]]\nhost = \"b\"\nport = 80\n\n";

    #[test]
    fn true_false_or_a_list_of_listeners() {
        let c = Config::parse(&format!("{H2C_HEAD}[http2]\nh2c = true\n"), "t.toml").unwrap();
        assert_eq!(c.http2.h2c, H2c::All);
        assert!(c.http2.h2c.on("0.0.0.0:80".parse().unwrap()));
        let c = Config::parse(
            &format!("{H2C_HEAD}[http2]\nh2c = [\"127.0.0.1:8080\"]\n"),
            "t.toml",
        )
        .unwrap();
        assert!(c.http2.h2c.on("127.0.0.1:8080".parse().unwrap()));
        assert!(!c.http2.h2c.on("0.0.0.0:80".parse().unwrap()));
        // One address is a list of one.
        let c = Config::parse(
            &format!("{H2C_HEAD}[http2]\nh2c = \"127.0.0.1:8080\"\n"),
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            c.http2.h2c,
            H2c::Only(vec!["127.0.0.1:8080".parse().unwrap()])
        );
        assert!(
            !Config::embedded_default()
                .http2
                .h2c
                .on("127.0.0.1:6081".parse().unwrap())
        );
    }

    #[test]
    fn bad_values_name_line_and_key() {
        assert_eq!(
            errors(&format!(
                "{H2C_HEAD}[http2]\nh2c = [\"127.0.0.1:8080\",\n  \"127.0.0.1:9090\"]\n"
            )),
            [
                "10:http2.h2c.1: 127.0.0.1:9090 is not one of server.listen (0.0.0.0:80, 127.0.0.1:8080): h2c names the cleartext listeners, as written there, that accept HTTP/2 with prior knowledge"
            ]
        );
        let tls = "[[tls]]\nname = \"t\"\nlisten = [\"127.0.0.1:443\"]\ncertificates = [{ cert = \"/nonexistent/c.pem\", key = \"/nonexistent/k.pem\" }]\n\n";
        let got = errors(&format!(
            "{H2C_HEAD}{tls}[http2]\nh2c = [\"127.0.0.1:443\"]\n"
        ));
        assert!(
            got.iter()
                .any(|e| e
                    .starts_with("14:http2.h2c.0: 127.0.0.1:443 is a TLS listener ([[tls]] `t`)")),
            "{got:?}"
        );
        let got = errors(&format!("{H2C_HEAD}[http2]\nh2c = \"yes\"\n"));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("9:http2.h2c: `yes` is not an address"),
            "{got:?}"
        );
        let got = errors(&format!("{H2C_HEAD}[http2]\nh2c = 1\n"));
        assert_eq!(
            got,
            [
                "9:http2.h2c: expected true, false, or a list of server.listen addresses such as [\"127.0.0.1:6081\"], found 1"
            ]
        );
    }

    const PP_HEAD: &str = "[server]\nlisten = [\"0.0.0.0:80\", \"127.0.0.1:8080\"]\n";
    const PP_TAIL: &str = "\n[[tls]]\nlisten = \"0.0.0.0:443\"\ncertificate = [{ cert = \"a.pem\", key = \"a.key\" }]\n\n[[backend]]\nhost = \"b\"\nport = 80\n";

    #[test]
    fn listeners_of_either_kind_and_trusted_networks() {
        let text = format!(
            "{PP_HEAD}proxy_protocol = [\"0.0.0.0:80\", \"0.0.0.0:443\"]\nproxy_protocol_from = [\"10.0.0.0/8\"]\n{PP_TAIL}"
        );
        let c = Config::parse(&text, "t.toml").unwrap();
        assert!(c.server.proxy_protocol.on("0.0.0.0:80".parse().unwrap()));
        assert!(c.server.proxy_protocol.on("0.0.0.0:443".parse().unwrap()));
        assert!(
            !c.server
                .proxy_protocol
                .on("127.0.0.1:8080".parse().unwrap())
        );
        assert!(trusted(
            &c.server.proxy_protocol_from,
            "10.1.2.3".parse().unwrap()
        ));
        assert!(!trusted(
            &c.server.proxy_protocol_from,
            "192.0.2.1".parse().unwrap()
        ));
        let all =
            format!("{PP_HEAD}proxy_protocol = true\nproxy_protocol_from = \"::1\"\n{PP_TAIL}");
        let c = Config::parse(&all, "t.toml").unwrap();
        assert!(
            c.server
                .proxy_protocol
                .on("127.0.0.1:8080".parse().unwrap())
        );
        assert!(
            !ServerConfig::default()
                .proxy_protocol
                .on("127.0.0.1:6081".parse().unwrap())
        );
    }

    #[test]
    fn unknown_listeners_and_no_trusted_network_are_errors() {
        let text = format!(
            "{PP_HEAD}proxy_protocol = [\"0.0.0.0:81\"]\nproxy_protocol_from = [\"10.0.0.0/8\"]\n{PP_TAIL}"
        );
        let errs = errors(&text);
        assert!(
            errs.iter()
                .any(|e| e.starts_with("3:server.proxy_protocol.0:")
                    && e.contains("0.0.0.0:81 is not a client listener")),
            "{errs:?}"
        );
        let errs = errors(&format!("{PP_HEAD}proxy_protocol = true\n{PP_TAIL}"));
        assert!(
            errs.iter().any(|e| e.contains("server.proxy_protocol_from")
                && e.contains("no network may send the header")),
            "{errs:?}"
        );
    }
}
