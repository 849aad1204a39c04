//! Listen addresses as written: why a text is not one (`IP:PORT`), in words that say what
//! to write instead. Where two addresses cannot work together is a check across settings
//! (config/validate/listeners.rs).

use std::net::{IpAddr, SocketAddr};

/// Why `text` (as written, quotes removed) is not a listen address (`IP:PORT`), in words that
/// say what to write instead. Host names are refused, not resolved: what a name resolves to can
/// change between one start and the next (and `localhost` is `127.0.0.1`, `::1` or both,
/// depending on the machine), while a listener's address must be the same on every start and
/// every reload, and the clash checks need the address itself.
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
