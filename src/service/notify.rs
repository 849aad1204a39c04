//! The systemd notification protocol (`sd_notify(3)`), written out: one datagram of
//! `KEY=VALUE` lines to the Unix socket named by `$NOTIFY_SOCKET` (a path, or `@name` in the
//! abstract namespace). Without the variable (not started by systemd with `Type=notify`)
//! every call does nothing.
//!
//! What Shellac sends: `READY=1` once every listener is bound and the storage (the disk tier)
//! is open; `RELOADING=1` with `MONOTONIC_USEC=` before a reload and `READY=1` after it;
//! `STOPPING=1` on shutdown; `STATUS=` a one-line summary every few seconds; `WATCHDOG=1` at
//! half of `$WATCHDOG_USEC`; `MAINPID=` from a process that takes over (`shellac upgrade`).

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::OnceLock;
use std::time::Duration;

/// Where notifications go, read from the environment once.
struct Target {
    addr: SocketAddr,
}

static TARGET: OnceLock<Option<Target>> = OnceLock::new();

/// Set once another process took over (`shellac upgrade`): this one says nothing more (its
/// STOPPING=1 would tell systemd the service is stopping).
static SILENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, nothing is sent.
pub fn silence() {
    SILENT.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn target() -> Option<&'static Target> {
    TARGET
        .get_or_init(|| {
            let path = std::env::var_os("NOTIFY_SOCKET")?;
            match socket_addr(path.as_encoded_bytes()) {
                Ok(addr) => Some(Target { addr }),
                Err(e) => {
                    tracing::warn!(error = %e, "NOTIFY_SOCKET is set but unusable; not notifying systemd");
                    None
                }
            }
        })
        .as_ref()
}

/// The address `$NOTIFY_SOCKET` names: `@name` is in the abstract namespace (Linux).
pub fn socket_addr(name: &[u8]) -> io::Result<SocketAddr> {
    match name.strip_prefix(b"@") {
        Some(abstract_name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(abstract_name)
        }
        None if name.starts_with(b"/") => {
            use std::os::unix::ffi::OsStrExt;
            SocketAddr::from_pathname(std::path::Path::new(std::ffi::OsStr::from_bytes(name)))
        }
        None => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "neither an absolute path nor @abstract",
        )),
    }
}

/// Whether systemd listens (`$NOTIFY_SOCKET` set and usable).
pub fn enabled() -> bool {
    target().is_some()
}

/// Sends `state` (newline-separated `KEY=VALUE` lines). False when not under systemd or the
/// datagram could not be sent (logged once per failure kind by the caller's context).
pub fn notify(state: &str) -> bool {
    if SILENT.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    let Some(t) = target() else {
        return false;
    };
    let sent = UnixDatagram::unbound().and_then(|s| s.send_to_addr(state.as_bytes(), &t.addr));
    if let Err(e) = &sent {
        tracing::debug!(error = %e, "sd_notify failed");
    }
    sent.is_ok()
}

/// `READY=1` with a status line.
pub fn ready(status: &str) -> bool {
    notify(&format!("READY=1\nSTATUS={}", one_line(status)))
}

/// `RELOADING=1` and the monotonic clock now, as systemd 253+ requires (and 252 accepts).
pub fn reloading() -> bool {
    notify(&format!(
        "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the configuration",
        monotonic_usec()
    ))
}

/// `STOPPING=1`.
pub fn stopping(status: &str) -> bool {
    notify(&format!("STOPPING=1\nSTATUS={}", one_line(status)))
}

/// `STATUS=`: one line.
pub fn status(line: &str) -> bool {
    notify(&format!("STATUS={}", one_line(line)))
}

/// `MAINPID=` this process, then `READY=1`: a process that took over from the one systemd
/// started (`shellac upgrade`).
pub fn took_over(status: &str) -> bool {
    notify(&format!(
        "MAINPID={}\nREADY=1\nSTATUS={}",
        std::process::id(),
        one_line(status)
    ))
}

/// `WATCHDOG=1`.
pub fn watchdog() -> bool {
    notify("WATCHDOG=1")
}

/// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC`, when it is set and meant for this
/// process (`$WATCHDOG_PID` absent or ours), as `sd_watchdog_enabled(3)` reads them.
pub fn watchdog_interval() -> Option<Duration> {
    watchdog_interval_from(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

fn watchdog_interval_from(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(me)
    {
        return None;
    }
    Some(Duration::from_micros(usec / 2))
}

/// CLOCK_MONOTONIC in microseconds (what `MONOTONIC_USEC=` carries).
pub fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid, exclusive pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1_000
}

/// A status is one line: newlines would start new `KEY=VALUE` assignments.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_is_half_the_interval_and_only_for_its_pid() {
        assert_eq!(
            watchdog_interval_from(Some("20000000"), None, 7),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            watchdog_interval_from(Some("20000000"), Some("7"), 7),
            Some(Duration::from_secs(10))
        );
        assert_eq!(watchdog_interval_from(Some("20000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval_from(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval_from(None, None, 7), None);
    }

    #[test]
    fn abstract_and_path_sockets_both_receive() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("shellac-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
        let rx = UnixDatagram::bind_addr(&addr).expect("bind abstract");
        let to = socket_addr(format!("@{name}").as_bytes()).expect("parse @name");
        UnixDatagram::unbound()
            .and_then(|s| s.send_to_addr(b"READY=1", &to))
            .expect("send");
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"READY=1");
        assert!(socket_addr(b"relative").is_err());
        assert!(socket_addr(b"/run/x/notify").is_ok());
    }

    #[test]
    fn status_is_one_line() {
        assert_eq!(one_line("a\nb\rc"), "a b c");
    }
}
