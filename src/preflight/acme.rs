//! What the machine says about a listener's `[[tls.acme]]`s.

use std::os::unix::fs::PermissionsExt;

use super::finding::{Finding, Severity};
use crate::config::acme::AcmeConfig;

/// What the machine says about `[[tls]]` number `i`'s `[[tls.acme]]` (run by `check` and
/// `serve`): the state directory can be created and written, the CA file is usable, a kept
/// account key is not readable by others (a warning).
pub(super) fn check(i: usize, acme: &[AcmeConfig]) -> Vec<Finding> {
    let mut out = Vec::new();
    let at = |j: usize, key: &str| {
        vec![
            "tls".to_string(),
            i.to_string(),
            "acme".to_string(),
            j.to_string(),
            key.to_string(),
        ]
    };
    for (j, a) in acme.iter().enumerate() {
        if let Err(e) = crate::acme::files::writable(&a.state_dir) {
            out.push(Finding {
                severity: Severity::Error,
                path: at(j, "state_dir"),
                message: format!("the ACME state directory cannot be used: {e}"),
            });
        }
        let key = crate::acme::files::account_dir(&a.state_dir, &a.directory).join("account.key");
        if let Ok(m) = std::fs::metadata(&key)
            && m.permissions().mode() & 0o077 != 0
        {
            out.push(Finding {
                severity: Severity::Warning,
                path: at(j, "state_dir"),
                message: format!(
                    "{} can be read by other users (mode {:o}); `chmod 600` it: whoever has it can act as this ACME account",
                    key.display(),
                    m.permissions().mode() & 0o777
                ),
            });
        }
        if let Some(ca) = &a.ca_root
            && let Err(e) = crate::tls::client::roots::ca_file(ca)
        {
            out.push(Finding {
                severity: Severity::Error,
                path: at(j, "ca_root"),
                message: e,
            });
        }
    }
    out
}
