//! Addresses that cannot work together, known from the file alone: two listeners on one
//! port, the admin listener on a client listener's address, a backend that is Shellac itself.
//!
//! A wildcard address (`0.0.0.0`, `[::]`) takes its port on every address of its family, and
//! `[::]` on IPv4 too (Shellac's IPv6 listeners are dual-stack), so binding a specific address
//! on that port fails. Port 0 (any free port) never clashes.

use std::net::{IpAddr, SocketAddr};

use super::Config;

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
pub(super) fn validate(c: &Config) -> Vec<(Vec<String>, String)> {
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

/// Why `text` (as written, quotes removed) is not a listen address (`IP:PORT`), in words that
/// say what to write instead. Host names are refused, not resolved: what a name resolves to can
/// change between one start and the next (and `localhost` is `127.0.0.1`, `::1` or both,
/// depending on the machine), while a listener's address must be the same on every start and
/// every reload, and the clash checks above need the address itself.
pub(super) fn not_an_address(text: &str) -> String {
    let text = text.trim().trim_matches(['"', '\'']);
    if let Ok(port) = text.parse::<u16>() {
        return format!(
            "`{port}` is a port, not an address: write \"0.0.0.0:{port}\" (every IPv4 address), \"[::]:{port}\" (every IPv6 and IPv4 address) or \"127.0.0.1:{port}\" (this machine only)"
        );
    }
    if let Ok(ip) = text
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        let example = SocketAddr::new(ip, 6081);
        return format!("`{text}` has no port: write it as \"{example}\"");
    }
    if let Some((host, port)) = text.rsplit_once(':')
        && port.parse::<u16>().is_ok()
        && !host.is_empty()
        && !host.contains([':', '[', ']', '/', ' '])
    {
        let instead = if host.eq_ignore_ascii_case("localhost") {
            format!("\"127.0.0.1:{port}\" (and \"[::1]:{port}\" for IPv6)")
        } else {
            format!(
                "the address `{host}` resolves to (e.g. \"192.0.2.10:{port}\"), or \"0.0.0.0:{port}\" for every address"
            )
        };
        return format!(
            "`{text}`: a listen address must be an IP address, not a host name (names are not resolved, so the address cannot change from one start to the next): write {instead}"
        );
    }
    format!(
        "`{text}` is not an address: write an IP address and port such as \"127.0.0.1:6081\" or \"[::1]:6081\""
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
