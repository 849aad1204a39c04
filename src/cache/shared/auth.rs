//! A Redis refusal of Shellac's credentials or permissions (`WRONGPASS`, `NOAUTH`, `NOPERM`,
//! a password the cluster does not expect) is a configuration error, not an outage: retrying
//! never fixes it. The first refusal is logged at ERROR naming the setting to fix; repeats are
//! counted (`shared_auth_error`) and logged again at most every [`REPEAT_LOG`], and the
//! refusal is shown by `GET /fleet`, `shellac stat` and the dashboard while it lasts.

use std::sync::Mutex;

/// How often a refusal that goes on is logged again (at ERROR, with the count since).
pub const REPEAT_LOG: u64 = 600_000;

/// How long after the last refusal it is still shown as current (an ACL fixed on the cluster
/// without a restart of Shellac clears it after this).
pub const SHOWN_FOR: u64 = 60_000;

/// What the cluster refused, and the setting to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Redis's words (`WRONGPASS invalid username-password pair ...`).
    pub error: String,
    /// What to fix, naming the setting.
    pub fix: String,
}

/// The refusal `error` (a Redis or client error message) is, if it is one; `username`: the
/// `storage.shared.username` in use.
pub fn classify(error: &str, username: Option<&str>) -> Option<Refusal> {
    let user = username.map_or("the default user".to_string(), |u| format!("user `{u}`"));
    let fix = if error.contains("WRONGPASS") {
        match username {
            Some(u) => format!(
                "the cluster refuses user `{u}` with this password: fix storage.shared.password (and storage.shared.username), or the user on every Redis node (ACL SETUSER {u} on >PASSWORD)"
            ),
            None => "the cluster refuses this password for the default user: set storage.shared.password to the nodes' requirepass (or storage.shared.username and password for an ACL user)".to_string(),
        }
    } else if error.contains("NOAUTH") {
        "the cluster requires a password and none is sent: set storage.shared.password (and storage.shared.username for an ACL user)".to_string()
    } else if error.contains("without any password configured") {
        "storage.shared.password is set but the cluster has no password for the default user: remove it, or set storage.shared.username to the ACL user it is for".to_string()
    } else if error.contains("NOPERM") {
        format!(
            "the cluster's ACL does not let {user} run what the shared tier needs: give it every key and channel under storage.shared.key_prefix and the commands in docs/fleet.md (`~PREFIX* &PREFIX* +@all -@dangerous` on every node), or set storage.shared.username to a user that has them"
        )
    } else {
        return None;
    };
    Some(Refusal {
        error: error.trim().to_string(),
        fix,
    })
}

#[derive(Debug, Default)]
struct State {
    refusal: Option<Refusal>,
    first_ms: u64,
    last_ms: u64,
    /// Refusals since the last line logged.
    unlogged: u64,
    logged_ms: u64,
    total: u64,
}

/// The refusals of one shared tier (shared by its connection task and its operations).
#[derive(Debug, Default)]
pub struct Refusals {
    state: Mutex<State>,
}

impl Refusals {
    /// One more refusal at `now_ms`: logged at ERROR the first time (and when it differs
    /// from the last), then at most every [`REPEAT_LOG`].
    pub fn report(&self, refusal: Refusal, now_ms: u64) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.total += 1;
        let new = s.refusal.as_ref() != Some(&refusal) || now_ms > s.last_ms + SHOWN_FOR;
        if new {
            tracing::error!(
                error = %refusal.error,
                "the Redis cluster refuses the shared tier's credentials: {} (a configuration error: retrying will not fix it; the node serves without the shared tier and retries, logging this again at most every 10 minutes)",
                refusal.fix
            );
            s.first_ms = now_ms;
            s.logged_ms = now_ms;
            s.unlogged = 0;
        } else if now_ms >= s.logged_ms + REPEAT_LOG {
            tracing::error!(
                error = %refusal.error,
                refused = s.unlogged + 1,
                "the Redis cluster still refuses the shared tier's credentials: {}",
                refusal.fix
            );
            s.logged_ms = now_ms;
            s.unlogged = 0;
        } else {
            s.unlogged += 1;
            tracing::debug!(error = %refusal.error, "the Redis cluster refused the shared tier again");
        }
        s.refusal = Some(refusal);
        s.last_ms = now_ms;
    }

    /// Connected with the credentials: whatever was refused is over.
    pub fn accepted(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.refusal.take().is_some() {
            tracing::info!("the Redis cluster accepts the shared tier's credentials now");
        }
    }

    /// The refusal still current at `now_ms` (within [`SHOWN_FOR`] of the last), as JSON
    /// for `/fleet`: `error`, `fix`, `since_ms` (how long ago the first), `count`.
    pub fn current(&self, now_ms: u64) -> Option<serde_json::Value> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let r = s.refusal.as_ref()?;
        (now_ms <= s.last_ms + SHOWN_FOR).then(|| {
            serde_json::json!({
                "error": r.error,
                "fix": r.fix,
                "since_ms": now_ms.saturating_sub(s.first_ms),
                "count": s.total,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_from_outages_and_name_the_setting() {
        let wrong = classify(
            "WRONGPASS invalid username-password pair or user is disabled.",
            Some("shellac"),
        )
        .unwrap();
        assert!(wrong.fix.contains("storage.shared.password"), "{wrong:?}");
        assert!(
            classify("NOAUTH Authentication required.", None)
                .unwrap()
                .fix
                .contains("storage.shared.password")
        );
        let noperm = classify(
            "NOPERM User shellac has no permissions to run the 'evalsha' command",
            Some("shellac"),
        )
        .unwrap();
        assert!(noperm.fix.contains("user `shellac`"), "{noperm:?}");
        assert!(classify("Connection refused (os error 111)", None).is_none());
        assert!(classify("An error was signalled by the server - TryAgain", None).is_none());
    }

    #[test]
    fn a_refusal_is_shown_while_it_lasts_and_cleared_when_accepted() {
        let r = Refusals::default();
        let refusal = classify("NOAUTH Authentication required.", None).unwrap();
        for t in 0..5 {
            r.report(refusal.clone(), 1000 + t * 250);
        }
        let v = r.current(2500).unwrap();
        assert_eq!(v["count"], 5);
        assert_eq!(v["since_ms"], 1500);
        assert!(
            r.current(2001 + SHOWN_FOR).is_none(),
            "over once refusals stop"
        );
        r.accepted();
        assert!(r.current(2500).is_none());
    }
}
