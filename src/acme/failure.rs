//! Why an ACME attempt failed: a kind per counter, and the message the admin API shows.

use super::http::NetworkError;
use crate::stats::Counters;

/// Why an attempt failed; each kind is counted (`acme_fail_<kind>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The ACME server could not be reached or did not answer.
    Network(String),
    /// The account could not be created, loaded or updated.
    Account(String),
    /// The server refused a request (an RFC 7807 problem document).
    Rejected(String),
    /// A challenge failed.
    Validation(String),
    /// The order did not become ready or valid in time.
    Timeout(String),
    /// The state directory could not be written.
    Storage(String),
    /// The certificate could not be made or used.
    Certificate(String),
}

impl Failure {
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Network(_) => "network",
            Failure::Account(_) => "account",
            Failure::Rejected(_) => "rejected",
            Failure::Validation(_) => "validation",
            Failure::Timeout(_) => "timeout",
            Failure::Storage(_) => "storage",
            Failure::Certificate(_) => "certificate",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::Network(m)
            | Failure::Account(m)
            | Failure::Rejected(m)
            | Failure::Validation(m)
            | Failure::Timeout(m)
            | Failure::Storage(m)
            | Failure::Certificate(m) => m,
        }
    }

    /// Counts it (and in the total).
    pub fn count(&self, c: &Counters) {
        c.acme_fail.inc();
        match self {
            Failure::Network(_) => c.acme_fail_network.inc(),
            Failure::Account(_) => c.acme_fail_account.inc(),
            Failure::Rejected(_) => c.acme_fail_rejected.inc(),
            Failure::Validation(_) => c.acme_fail_validation.inc(),
            Failure::Timeout(_) => c.acme_fail_timeout.inc(),
            Failure::Storage(_) => c.acme_fail_storage.inc(),
            Failure::Certificate(_) => c.acme_fail_certificate.inc(),
        }
    }

    /// A problem document in a sentence: its detail and type.
    pub(super) fn describe(p: &instant_acme::Problem) -> String {
        let kind = p
            .r#type
            .as_deref()
            .map(|t| t.trim_start_matches("urn:ietf:params:acme:error:"));
        let mut out = match (&p.detail, kind) {
            (Some(d), Some(k)) => format!("{d} ({k})"),
            (Some(d), None) => d.clone(),
            (None, Some(k)) => k.to_string(),
            (None, None) => "an error without details".into(),
        };
        for s in &p.subproblems {
            if let Some(d) = &s.detail {
                out.push_str(&format!("; {d}"));
            }
        }
        out
    }

    /// An instant-acme error, sorted by what it means for the operator.
    pub(super) fn from_acme(e: instant_acme::Error) -> Failure {
        use instant_acme::Error as E;
        match e {
            E::Api(p) => {
                let text = Failure::describe(&p);
                let kind = p
                    .r#type
                    .as_deref()
                    .unwrap_or("")
                    .trim_start_matches("urn:ietf:params:acme:error:");
                match kind {
                    "connection" | "dns" | "incorrectResponse" | "tls" | "caa" => {
                        Failure::Validation(text)
                    }
                    "accountDoesNotExist" | "invalidContact" | "unsupportedContact" => {
                        Failure::Account(text)
                    }
                    "externalAccountRequired" => Failure::Account(format!(
                        "{text}: this CA binds ACME accounts to an account of its own; set \
                         `eab_kid` and `eab_hmac_key` to what it gave"
                    )),
                    _ => Failure::Rejected(text),
                }
            }
            E::Timeout(_) => {
                Failure::Timeout("the ACME server did not finish the order within 2 minutes".into())
            }
            E::Other(inner) => match inner.downcast::<NetworkError>() {
                Ok(n) => Failure::Network(n.0),
                Err(other) => Failure::Network(other.to_string()),
            },
            E::Json(e) => Failure::Rejected(format!(
                "the server's answer is not what an ACME server sends ({e}); is `directory` right?"
            )),
            E::Crypto | E::KeyRejected => Failure::Account(e.to_string()),
            e => Failure::Rejected(e.to_string()),
        }
    }

    /// A failure of the account step, whatever its kind would otherwise be.
    pub(super) fn in_account(self) -> Failure {
        match self {
            Failure::Network(m) => Failure::Network(m),
            other => Failure::Account(other.message().to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}
