//! Binary upgrade without closing a listening socket (`shellac upgrade`, `POST /upgrade`,
//! SIGUSR2): the running process starts the binary now at the path it was started from, with
//! the same arguments, and the two speak over `service::handover`'s channel:
//!
//! 1. the new process reads and checks its configuration, then says `hello`; one that fails
//!    exits, and this one serves on untouched;
//! 2. this one sends every listening socket (client, TLS, admin) with `SCM_RIGHTS`: from then
//!    on both accept on them, so no connection is refused;
//! 3. this one closes its disk tier cleanly (the writer drains, the open region is sealed with
//!    its summary, the file lock released) and says `released`; the new process opens it from
//!    the region summaries alone — no scan of an entry, no object read — and the index is
//!    what this one had;
//! 4. the new process serves, tells systemd `MAINPID=` itself and `READY=1`, and says `ready`;
//!    this one goes quiet towards systemd, stops accepting and drains (the caller's shutdown).
//!
//! A new process that dies after step 3 leaves this one serving without a disk tier to write
//! to (reads of what it indexed go on); it logs that a restart brings the disk tier back.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::reload::Live;
use crate::service::handover::{self, Channel};
use crate::service::listeners::Role;
use crate::service::notify;

/// How long the new process may take to read its configuration, and then to start serving.
const STEP_LIMIT: Duration = Duration::from_secs(120);

/// The executable and arguments this process was started with (recorded before anything can
/// replace the file: `/proc/self/exe` of a replaced binary names the deleted old one).
struct Invocation {
    exe: PathBuf,
    args: Vec<OsString>,
}

static INVOCATION: OnceLock<Invocation> = OnceLock::new();
static IN_PROGRESS: AtomicBool = AtomicBool::new(false);
/// Signalled when an upgrade finished: `serve` then shuts this process down.
static FINISHED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Resolves once an upgrade handed everything to a new process.
pub async fn finished() {
    FINISHED.notified().await;
}

/// Records how this process was started; `serve` calls it first.
pub fn record_invocation() {
    let exe = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("/usr/bin/shellac"));
    let _ = INVOCATION.set(Invocation {
        exe,
        args: std::env::args_os().skip(1).collect(),
    });
}

/// A finished upgrade.
#[derive(Debug)]
pub struct Upgraded {
    pub old_pid: u32,
    pub new_pid: u32,
    pub binary: PathBuf,
}

/// Runs an upgrade; `Ok` when the new process serves (the caller then shuts this one down).
pub async fn perform(live: Arc<Live>) -> Result<Upgraded, String> {
    if IN_PROGRESS.swap(true, Ordering::SeqCst) {
        return Err("an upgrade is already in progress".into());
    }
    let result = run(live).await;
    if result.is_err() {
        IN_PROGRESS.store(false, Ordering::SeqCst);
    }
    result
}

async fn run(live: Arc<Live>) -> Result<Upgraded, String> {
    let inv = INVOCATION
        .get()
        .ok_or("this process did not record how it was started")?;
    let (ours, theirs) = Channel::pair().map_err(|e| format!("upgrade channel: {e}"))?;
    let mut child = spawn(inv, theirs)?;
    let new_pid = child.id();
    tracing::info!("upgrade: started {} (pid {new_pid})", inv.exe.display());
    let ours = Arc::new(ours);

    // 1. The new process read its configuration.
    match recv(&ours).await {
        Ok(text) if text.starts_with("hello") => {}
        Ok(text) => return Err(reap(&mut child, format!("unexpected message {text:?}"))),
        Err(e) => {
            let why = format!("the new binary did not start: {e}");
            return Err(reap_blocking(child, why).await);
        }
    }

    // 2. The listening sockets.
    let count = match hand_over_listeners(&live, &ours).await {
        Ok(n) => n,
        Err(e) => {
            return Err(reap(
                &mut child,
                format!("cannot hand the sockets over: {e}"),
            ));
        }
    };
    tracing::info!("upgrade: {count} listening sockets handed to pid {new_pid}");

    // 3. The disk tier, closed cleanly for the new process to open.
    let proxy = live.load();
    let _ = tokio::task::spawn_blocking(move || proxy.cache.storage.close()).await;
    if let Err(e) = ours.send("released", &[]) {
        return Err(reap(&mut child, format!("upgrade channel: {e}")));
    }

    // 4. Serving.
    if let Err(why) = new_one_serves(&ours).await {
        tracing::error!(
            "upgrade failed after the disk tier was handed over: {why}; serving on without writing to the disk tier (a restart brings it back)"
        );
        return Err(reap_blocking(child, why).await);
    }
    // systemd now knows the new process as the service's main one.
    notify::silence();
    // Reaped when it exits; it outlives this process (re-parented).
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    tracing::info!("upgrade: pid {new_pid} serves; this process stops accepting and drains");
    FINISHED.notify_one();
    Ok(Upgraded {
        old_pid: std::process::id(),
        new_pid,
        binary: inv.exe.clone(),
    })
}

/// Starts the new process as this one was started, with `theirs` (its end of the channel)
/// inherited and named in its environment.
fn spawn(inv: &Invocation, theirs: Channel) -> Result<Child, String> {
    let fd = theirs
        .inheritable_fd()
        .map_err(|e| format!("upgrade channel: {e}"))?;
    let child = Command::new(&inv.exe)
        .args(&inv.args)
        .env(handover::ENV, fd.to_string())
        // Meant for this process, not the new one (sd_watchdog_enabled, sd_listen_fds).
        .env_remove("WATCHDOG_PID")
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_FDNAMES")
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", inv.exe.display()))?;
    drop(theirs);
    Ok(child)
}

/// Ends a new process that failed: `why`, with how it exited.
fn reap(child: &mut Child, why: String) -> String {
    let _ = child.kill();
    match child.wait() {
        Ok(status) => format!("{why} (new process {status})"),
        Err(_) => why,
    }
}

/// [`reap`] off the runtime's threads, for a process that may not have exited yet.
async fn reap_blocking(mut child: Child, why: String) -> String {
    tokio::task::spawn_blocking(move || reap(&mut child, why))
        .await
        .unwrap_or_else(|e| e.to_string())
}

/// Step 2: every listening socket (client, TLS, admin) with its role, over the channel; how
/// many were sent.
async fn hand_over_listeners(live: &Live, ours: &Channel) -> std::io::Result<usize> {
    let admin = handover::admin();
    live.with_listeners(|list| {
        let mut roles = Vec::new();
        let mut fds: Vec<RawFd> = Vec::new();
        for (addr, tls, fd) in list {
            let role = match tls {
                None => Role::Plain,
                Some(name) => Role::Tls(name.to_string()),
            };
            roles.push((addr, role));
            fds.push(fd);
        }
        if let Some((addr, fd)) = admin {
            roles.push((addr, Role::Admin));
            fds.push(fd);
        }
        ours.send(&handover::encode_listeners(&roles), &fds)
            .map(|()| roles.len())
    })
    .await
}

/// Step 4: the new process says it serves; else why not.
async fn new_one_serves(ours: &Arc<Channel>) -> Result<(), String> {
    match recv(ours).await {
        Ok(text) if text == "ready" => Ok(()),
        Ok(text) => Err(format!("unexpected message {text:?}")),
        Err(e) => Err(format!("the new binary failed to start serving: {e}")),
    }
}

async fn recv(channel: &Arc<Channel>) -> Result<String, String> {
    let ch = channel.clone();
    tokio::task::spawn_blocking(move || ch.recv(STEP_LIMIT))
        .await
        .map_err(|e| e.to_string())?
        .map(|(text, _)| text)
        .map_err(|e| e.to_string())
}

/// The new process's side, before it starts serving: says `hello`, takes the listening
/// sockets into `service::listeners`, waits for the disk tier to be released.
pub fn receive(channel: &Channel) -> Result<usize, String> {
    channel
        .send(&format!("hello {}", std::process::id()), &[])
        .map_err(|e| format!("upgrade channel: {e}"))?;
    let (text, fds) = channel
        .recv(STEP_LIMIT)
        .map_err(|e| format!("upgrade channel: {e}"))?;
    let roles = handover::decode_listeners(&text)
        .ok_or_else(|| format!("upgrade channel: not a listener list: {text:?}"))?;
    if roles.len() != fds.len() {
        return Err(format!(
            "upgrade channel: {} listeners but {} descriptors",
            roles.len(),
            fds.len()
        ));
    }
    let count = roles.len();
    for ((addr, role), fd) in roles.into_iter().zip(fds) {
        let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
        let listener = crate::service::listeners::listening_tcp(raw)
            .map_err(|e| format!("upgrade channel: descriptor for {addr}: {e}"))?;
        crate::service::listeners::offer(addr, Some(role), "the previous process".into(), listener);
    }
    let (text, _) = channel
        .recv(STEP_LIMIT)
        .map_err(|e| format!("upgrade channel: {e}"))?;
    if text != "released" {
        return Err(format!("upgrade channel: unexpected message {text:?}"));
    }
    Ok(count)
}

/// The new process serves: systemd learns its PID, the old process is told.
pub fn serving(channel: &Channel, status: &str) {
    notify::took_over(status);
    if let Err(e) = channel.send("ready", &[]) {
        tracing::warn!("upgrade channel: {e}");
    }
}
