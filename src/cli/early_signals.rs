//! Signals that arrive while `shellac serve` starts, before the running server's handlers
//! exist (configuration read, VCL compiled, machine checked, sockets received): caught from
//! the first line of `serve` so that none of them kills the process with its default action.
//!
//! SIGTERM and SIGINT stop the start-up before anything listens (nothing half-started: the
//! process exits 0 as after a normal stop; in an upgrade, once the old process released the
//! disk tier, the new one starts and then stops as usual). SIGHUP, SIGUSR1 and SIGUSR2 are
//! kept and raised again once the running server's handlers exist, so a reload asked for
//! during start-up happens right after it (the file may have changed after it was read).

use std::sync::atomic::{AtomicU32, Ordering};

/// The signals caught, one bit each (`1 << signo`; every number here is below 32).
static PENDING: AtomicU32 = AtomicU32::new(0);

/// The signals this module catches.
const CAUGHT: [libc::c_int; 5] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The handler: one atomic OR, which is async-signal-safe. Once tokio registers its own
/// handler for the signal it calls this one too (signal-hook-registry chains to the previous
/// handler); a bit set then is never read, as [`hand_over`] has run by then.
extern "C" fn note(signo: libc::c_int) {
    if (0..32).contains(&signo) {
        PENDING.fetch_or(1 << signo, Ordering::SeqCst);
    }
}

/// Catches SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 (`SA_RESTART`: a read of the
/// configuration is not interrupted). Call first thing in `serve`, before any thread exists.
pub(super) fn catch() {
    for signo in CAUGHT {
        // SAFETY: `note` only does an atomic OR; the sigaction struct is zeroed then filled
        // as sigaction(2) asks, and the mask emptied with sigemptyset.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signo, &action, std::ptr::null_mut()) != 0 {
                tracing::warn!(
                    "signal {signo} cannot be caught during start-up: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

/// The stop signal that came during start-up (`"SIGTERM"` or `"SIGINT"`), if one did.
pub(super) fn stop_asked() -> Option<&'static str> {
    let pending = PENDING.load(Ordering::SeqCst);
    if pending & (1 << libc::SIGTERM) != 0 {
        Some("SIGTERM")
    } else if pending & (1 << libc::SIGINT) != 0 {
        Some("SIGINT")
    } else {
        None
    }
}

/// Called once the running server's handlers are registered (tokio's, which see every
/// signal from then on): the signals caught before that are raised again for them, each once
/// however many times it came. A signal that came between their registration and this call
/// is seen twice (a second reload of the same file: harmless).
pub(super) fn hand_over() {
    let pending = PENDING.swap(0, Ordering::SeqCst);
    for (signo, name) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGUSR2, "SIGUSR2"),
    ] {
        if pending & (1 << signo) != 0 {
            tracing::info!("{name} came during start-up: handled now that the server runs");
            // SAFETY: raise(3) on this process's own thread, for a signal with a handler.
            unsafe {
                libc::raise(signo);
            }
        }
    }
}
