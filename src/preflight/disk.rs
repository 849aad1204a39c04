//! The disk tier's data file, tried as `serve` opens it: openable (or creatable), not locked by
//! another process, and room for its preallocation on the filesystem.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::files::{can_create_in, directory_of};
use super::finding::{Finding, Severity, at};
use crate::config::{DiskConfig, OnOpenError, units};

/// What the machine says about `[storage.disk]`; findings are warnings when
/// `on_open_error = "memory-only"` (`serve` runs without the tier then).
pub(super) fn disk(d: &DiskConfig) -> Vec<Finding> {
    // With `memory-only`, `serve` runs without the tier instead of refusing.
    let (severity, consequence) = match d.on_open_error {
        OnOpenError::Refuse => (Severity::Error, ""),
        OnOpenError::MemoryOnly => (
            Severity::Warning,
            " (on_open_error = \"memory-only\": `serve` will run without the disk tier)",
        ),
    };
    let finding = |severity, field: &str, message: String| Finding {
        severity,
        path: at(&["storage", "disk", field]),
        message,
    };
    let mut out = Vec::new();
    if d.path.as_os_str().is_empty() || d.path.is_dir() {
        return out; // Config::validate says so.
    }
    let existing = match std::fs::metadata(&d.path) {
        Ok(m) if !m.is_file() => {
            out.push(finding(
                severity,
                "path",
                format!("{} is not a regular file{consequence}", d.path.display()),
            ));
            return out;
        }
        Ok(_) => match OpenOptions::new().read(true).write(true).open(&d.path) {
            Ok(file) => Some(file),
            Err(e) => {
                out.push(finding(
                    severity,
                    "path",
                    format!(
                        "cannot open {} for reading and writing: {e}{consequence}",
                        d.path.display()
                    ),
                ));
                return out;
            }
        },
        Err(_) => {
            if let Err(e) = can_create_in(&directory_of(&d.path)) {
                out.push(finding(
                    severity,
                    "path",
                    format!("cannot create {}: {e}{consequence}", d.path.display()),
                ));
                return out;
            }
            None
        }
    };
    if let Some(file) = &existing
        && !lockable(file)
    {
        out.push(finding(
            Severity::Warning,
            "path",
            format!(
                "{} is locked by another process now (a running Shellac?); `serve` cannot use it until that process stops{}",
                d.path.display(),
                if d.on_open_error == OnOpenError::Refuse {
                    " (on_open_error = \"refuse\": it would not start)"
                } else {
                    consequence
                }
            ),
        ));
    }
    let regions = d.size.0.checked_div(d.region_size.0).unwrap_or(0);
    let needed = crate::cache::disk::format::DATA_START
        .saturating_add(regions.saturating_mul(d.region_size.0));
    let allocated = existing
        .as_ref()
        .and_then(|f| f.metadata().ok())
        .map_or(0, |m| m.blocks().saturating_mul(512));
    if let Some(available) = free_space(&directory_of(&d.path))
        && needed.saturating_sub(allocated) > available
    {
        out.push(finding(
            severity,
            "size",
            format!(
                "not enough free space for the disk cache in {}: {} needed, {} available{consequence}",
                directory_of(&d.path).display(),
                units::format_size(needed.saturating_sub(allocated)),
                units::format_size(available)
            ),
        ));
    }
    out
}

/// Whether nobody else holds the data file's lock (taken and released at once).
fn lockable(file: &File) -> bool {
    // SAFETY: flock on a valid descriptor we own; released when `file` closes (or below).
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if locked {
        // SAFETY: as above.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
    }
    locked
}

/// Bytes an unprivileged writer may still allocate in the filesystem holding `dir`.
fn free_space(dir: &Path) -> Option<u64> {
    let dir = File::open(dir).ok()?;
    // SAFETY: fstatvfs fills the zeroed struct it is given for a valid descriptor.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a struct of the type fstatvfs fills.
    if unsafe { libc::fstatvfs(dir.as_raw_fd(), &mut vfs) } != 0 {
        return None;
    }
    Some((vfs.f_bavail as u64).saturating_mul(vfs.f_frsize as u64))
}
