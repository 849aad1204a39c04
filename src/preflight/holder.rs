//! Who holds a port `shellac check` finds in use (Linux `/proc`): the running Shellac the
//! file is for (fine: it is the file's own listener, and `shellac reload` applies the file
//! without a restart), another Shellac, or another process (an error: `serve` could not
//! listen there). A process this user may not look into is recognised by the file's admin
//! listener answering as Shellac. A port nobody listens on can still be taken: by a
//! connection that has it as its own end (an outgoing connection's source port, or one
//! closing in TIME-WAIT), which happens to ports in the kernel's ephemeral range.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Who holds a listening port.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Holder {
    /// The Shellac started with this file (pid, when it could be seen).
    ThisShellac(Option<u32>),
    /// Another Shellac: pid, the file it runs with (`None`: the embedded default).
    OtherShellac(u32, Option<PathBuf>),
    /// Another program: pid, its name.
    Other(u32, String),
    /// Nobody listens: a connection from this port holds it (its state in `ss`'s words, and
    /// the other end).
    Connection(&'static str, String),
    /// Nobody this user can see.
    Unknown,
}

/// Who holds `addr` (a TCP port in use); `file`: the configuration being checked, `admin`:
/// its admin listener.
pub(super) fn holder(addr: SocketAddr, file: Option<&Path>, admin: Option<SocketAddr>) -> Holder {
    let inodes = listening_inodes(addr.port());
    if let Some(pid) = pid_of(&inodes) {
        let argv = cmdline(pid);
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let program = argv
            .first()
            .and_then(|a| Path::new(a).file_name())
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !(program == "shellac" || name == "shellac") {
            return Holder::Other(pid, if name.is_empty() { program } else { name });
        }
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        let theirs = config_arg(&argv).map(|c| cwd.join(c));
        let same = match (&theirs, file) {
            (Some(t), Some(f)) => same_file(t, f),
            _ => false,
        };
        return if same {
            Holder::ThisShellac(Some(pid))
        } else {
            Holder::OtherShellac(pid, theirs)
        };
    }
    match admin {
        Some(a) if answers_as_shellac(a) => Holder::ThisShellac(None),
        _ => match connection_from(addr.port()) {
            Some((state, peer)) if inodes.is_empty() => Holder::Connection(state, peer),
            _ => Holder::Unknown,
        },
    }
}

/// The kernel's ephemeral port range (`net.ipv4.ip_local_port_range`), where outgoing
/// connections take their source ports.
pub(super) fn ephemeral_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut ends = text.split_whitespace().map(|p| p.parse::<u16>());
    match (ends.next(), ends.next()) {
        (Some(Ok(low)), Some(Ok(high))) => Some((low, high)),
        _ => None,
    }
}

/// A connection whose own end is `port` (not a listener): its state as `ss` names it and
/// its other end.
fn connection_from(port: u16) -> Option<(&'static str, String)> {
    let want = format!("{port:04X}");
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 3 && f[3] != "0A" && f[1].rsplit(':').next() == Some(want.as_str()) {
                return Some((state_name(f[3]), peer_text(f[2])));
            }
        }
    }
    None
}

/// A TCP state of `/proc/net/tcp` (include/net/tcp_states.h) as `ss` prints it.
fn state_name(hex: &str) -> &'static str {
    match hex {
        "01" => "ESTAB",
        "02" => "SYN-SENT",
        "03" => "SYN-RECV",
        "04" => "FIN-WAIT-1",
        "05" => "FIN-WAIT-2",
        "06" => "TIME-WAIT",
        "07" => "CLOSE",
        "08" => "CLOSE-WAIT",
        "09" => "LAST-ACK",
        "0B" => "CLOSING",
        _ => "another state",
    }
}

/// `/proc/net/tcp`'s `0100007F:B847` (an IPv4 address in the kernel's byte order, a port in
/// hex) as `127.0.0.1:47175`; IPv6 ends as `[…]:port`.
fn peer_text(field: &str) -> String {
    let Some((ip, port)) = field.split_once(':') else {
        return field.to_string();
    };
    let port = u16::from_str_radix(port, 16).unwrap_or(0);
    let words: Vec<u32> = (0..ip.len() / 8)
        .filter_map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).ok())
        .collect();
    match words.as_slice() {
        [v4] => format!("{}:{port}", std::net::Ipv4Addr::from(v4.swap_bytes())),
        [a, b, c, d] => {
            let mut octets = [0u8; 16];
            for (i, w) in [a, b, c, d].into_iter().enumerate() {
                octets[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            format!("[{}]:{port}", std::net::Ipv6Addr::from(octets))
        }
        _ => field.to_string(),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// The `--config FILE` (`-c FILE`, `--config=FILE`) of a command line.
fn config_arg(argv: &[String]) -> Option<&str> {
    let mut args = argv.iter();
    while let Some(a) = args.next() {
        if a == "--config" || a == "-c" {
            return args.next().map(String::as_str);
        }
        if let Some(v) = a.strip_prefix("--config=") {
            return Some(v);
        }
    }
    None
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Socket inodes listening (state 0A) on `port`, IPv4 and IPv6.
fn listening_inodes(port: u16) -> Vec<String> {
    let want = format!("{port:04X}");
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[3] == "0A" && f[1].rsplit(':').next() == Some(want.as_str()) {
                out.push(f[9].to_string());
            }
        }
    }
    out
}

/// The process with one of `inodes` among its open files (the first found).
fn pid_of(inodes: &[String]) -> Option<u32> {
    if inodes.is_empty() {
        return None;
    }
    let targets: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path())
                && targets.iter().any(|t| link.as_os_str() == t.as_str())
            {
                return Some(pid);
            }
        }
    }
    None
}

/// Whether `admin` answers as Shellac's admin listener (its dashboard needs no token).
fn answers_as_shellac(admin: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&admin, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(format!("GET / HTTP/1.0\r\nHost: {admin}\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut body = Vec::new();
    let _ = s.take(64 * 1024).read_to_end(&mut body);
    String::from_utf8_lossy(&body).contains("<h1>Shellac</h1>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_only_a_connection_holds_is_named_with_its_state_and_peer() {
        // A connection bound to a port of its own, closed first on that side: the port stays
        // in TIME-WAIT with nobody listening on it.
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        client
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let mine = client.local_addr().unwrap().as_socket().unwrap();
        client
            .connect(&server.local_addr().unwrap().into())
            .unwrap();
        let (accepted, _) = server.accept().unwrap();
        drop(client);
        let mut rest = Vec::new();
        let _ = (&accepted).read_to_end(&mut rest);
        drop(accepted);
        assert!(
            std::net::TcpListener::bind(mine).is_err(),
            "the port is still taken"
        );
        assert_eq!(
            holder(mine, None, None),
            Holder::Connection("TIME-WAIT", server.local_addr().unwrap().to_string())
        );
    }

    #[test]
    fn proc_net_tcp_ends_read_as_addresses() {
        assert_eq!(peer_text("0100007F:B847"), "127.0.0.1:47175");
        assert_eq!(
            peer_text("00000000000000000000000001000000:0050"),
            "[::1]:80"
        );
        assert_eq!(state_name("06"), "TIME-WAIT");
    }

    #[test]
    fn a_port_this_process_holds_is_held_by_another_program() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        match holder(addr, None, None) {
            Holder::Other(pid, _) => assert_eq!(pid, std::process::id()),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            config_arg(&[
                "shellac".into(),
                "serve".into(),
                "-c".into(),
                "a.toml".into()
            ]),
            Some("a.toml")
        );
        assert_eq!(
            config_arg(&["x".into(), "--config=/b.toml".into()]),
            Some("/b.toml")
        );
    }
}
