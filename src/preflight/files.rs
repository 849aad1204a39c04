//! Paths a configuration names, tried as `serve` would use them: document roots, a backend's
//! Unix socket, the access log (opened for appending, or created next to where it goes).

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use super::finding::{Finding, Severity, at};

/// A document root (a backend's or a site's) that is not a directory this process can list.
pub(super) fn document_root(root: &Path, path: Vec<String>) -> Option<Finding> {
    let problem = match std::fs::metadata(root) {
        Ok(m) if !m.is_dir() => "is not a directory".to_string(),
        Ok(_) => format!("cannot be read: {}", std::fs::read_dir(root).err()?),
        Err(e) => format!("cannot be opened: {e}"),
    };
    Some(Finding {
        severity: Severity::Error,
        path,
        message: format!("document root {} {problem}", root.display()),
    })
}

/// A backend's document root (a directory this process can list) and Unix socket (its
/// directory exists; what is there is a socket — not there yet is a warning: the application
/// may start after Shellac).
pub(super) fn origin_paths(i: usize, b: &crate::config::BackendConfig) -> Vec<Finding> {
    let mut out = Vec::new();
    let key = |k: &str| vec!["backend".to_string(), i.to_string(), k.to_string()];
    if let Some(root) = &b.root {
        out.extend(document_root(root, key("root")));
    }
    if let Some(path) = b.address.as_deref().and_then(crate::config::unix_path) {
        use std::os::unix::fs::FileTypeExt;
        let dir = directory_of(path);
        let (severity, message) = match std::fs::metadata(path) {
            Ok(m) if m.file_type().is_socket() => return out,
            Ok(_) => (
                Severity::Error,
                format!("{} is not a socket", path.display()),
            ),
            Err(_) if !dir.is_dir() => (
                Severity::Error,
                format!(
                    "{}: directory {} does not exist",
                    path.display(),
                    dir.display()
                ),
            ),
            Err(e) => (
                Severity::Warning,
                format!("{}: {e} (nothing listens there yet)", path.display()),
            ),
        };
        out.push(Finding {
            severity,
            path: key("address"),
            message,
        });
    }
    out
}

/// The directory a file named by `path` goes in.
pub(super) fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether a new file can be created in `dir`: a probe file is created and removed at once.
pub(super) fn can_create_in(dir: &Path) -> io::Result<()> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                e.kind(),
                format!("directory {} does not exist", dir.display()),
            ));
        }
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        Ok(_) => {}
    }
    let probe = dir.join(format!(".shellac-check-{}", std::process::id()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create files in {}: {e}", dir.display()),
            )
        })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

pub(super) fn access_log(path: &Path) -> Option<Finding> {
    let problem = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Some(format!("{} is a directory", path.display())),
        // A FIFO or device is opened by `serve` as it is (a FIFO waits for its reader).
        Ok(m) if !m.is_file() => None,
        Ok(_) => OpenOptions::new()
            .append(true)
            .open(path)
            .err()
            .map(|e| format!("cannot open {} for appending: {e}", path.display())),
        Err(_) => can_create_in(&directory_of(path))
            .err()
            .map(|e| format!("cannot create {}: {e}", path.display())),
    }?;
    Some(Finding {
        severity: Severity::Error,
        path: at(&["log", "access_log"]),
        message: problem,
    })
}
