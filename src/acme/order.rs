//! One certificate order (RFC 8555 §7.4): new order → for each authorization not yet valid,
//! publish the challenge's answer and tell the server it is ready → wait for the order to be
//! ready → finalize with a CSR for a new key → wait for the certificate → download it.
//! The challenges' answers are withdrawn when this returns, whatever the outcome.

use std::sync::Arc;
use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Identifier, NewOrder, OrderStatus, RetryPolicy,
};

use super::challenge::{self, Published, Tokens};
use super::failure::Failure;
use crate::config::acme::{Challenge, KeyType};
use crate::tls::store::CertStore;

/// How long the server may take to validate, and then to issue.
const POLL: RetryPolicy = RetryPolicy::new()
    .initial_delay(Duration::from_millis(250))
    .backoff(1.5)
    .timeout(Duration::from_secs(120));

/// What an order brings back.
pub struct Issued {
    /// The certificate and its chain (PEM), as the server sent them.
    pub chain_pem: String,
    /// The certificate's private key (PKCS#8 PEM), made for this order.
    pub key_pem: String,
}

/// Where challenge answers go while the order is validated.
pub struct Responders {
    pub tokens: Arc<Tokens>,
    /// The listener's certificates (TLS-ALPN-01 answers); None when the listener is gone.
    pub store: Option<Arc<CertStore>>,
}

/// Orders a certificate for `names` and waits for it.
pub async fn obtain(
    account: &Account,
    names: &[String],
    challenge: Challenge,
    key_type: KeyType,
    responders: &Responders,
) -> Result<Issued, Failure> {
    let identifiers: Vec<Identifier> = names.iter().map(|n| Identifier::Dns(n.clone())).collect();
    let mut order = account
        .new_order(&NewOrder::new(&identifiers))
        .await
        .map_err(Failure::from_acme)?;
    let mut published = Published::new(responders.tokens.clone(), responders.store.clone());
    let wanted = match challenge {
        Challenge::Http01 => ChallengeType::Http01,
        Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
    };
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz.map_err(Failure::from_acme)?;
        let name = authz.identifier().to_string();
        match authz.status {
            AuthorizationStatus::Valid => continue, // Validated recently: nothing to prove.
            AuthorizationStatus::Pending => {}
            other => {
                return Err(Failure::Validation(format!(
                    "the authorization for {name} is {other:?}"
                )));
            }
        }
        let mut ch = authz.challenge(wanted.clone()).ok_or_else(|| {
            Failure::Rejected(format!(
                "the ACME server does not offer {} for {name}",
                challenge.as_str()
            ))
        })?;
        let key_authorization = ch.key_authorization();
        match challenge {
            Challenge::Http01 => published.http(&ch.token, key_authorization.as_str()),
            Challenge::TlsAlpn01 => {
                let cert =
                    challenge::tls_alpn_certificate(&name, key_authorization.digest().as_ref())
                        .map_err(Failure::Certificate)?;
                if !published.tls(&name, cert) {
                    return Err(Failure::Validation(
                        "the TLS listener is gone (reload?)".into(),
                    ));
                }
            }
        }
        ch.set_ready().await.map_err(Failure::from_acme)?;
    }
    let status = order.poll_ready(&POLL).await.map_err(Failure::from_acme)?;
    if status != OrderStatus::Ready {
        return Err(Failure::Validation(why_invalid(&mut order).await));
    }
    let key = match key_type {
        KeyType::EcdsaP256 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256),
        KeyType::EcdsaP384 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384),
    }
    .map_err(|e| Failure::Certificate(format!("cannot make the certificate's key: {e}")))?;
    let mut params = rcgen::CertificateParams::new(names.to_vec())
        .map_err(|e| Failure::Certificate(format!("cannot make the CSR: {e}")))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let csr = params
        .serialize_request(&key)
        .map_err(|e| Failure::Certificate(format!("cannot make the CSR: {e}")))?;
    order
        .finalize_csr(csr.der())
        .await
        .map_err(Failure::from_acme)?;
    let chain_pem = order
        .poll_certificate(&POLL)
        .await
        .map_err(Failure::from_acme)?;
    drop(published);
    Ok(Issued {
        chain_pem,
        key_pem: key.serialize_pem(),
    })
}

/// Why an order went invalid: each failed challenge's error, as the server describes it.
async fn why_invalid(order: &mut instant_acme::Order) -> String {
    let mut out = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let Ok(mut authz) = authz else { continue };
        let _ = authz.refresh().await;
        let name = authz.identifier().to_string();
        for c in &authz.challenges {
            if let Some(e) = &c.error {
                out.push(format!("{name}: {}", Failure::describe(e)));
            }
        }
        if out.is_empty() && authz.status != AuthorizationStatus::Valid {
            out.push(format!("{name}: authorization {:?}", authz.status));
        }
    }
    if out.is_empty() {
        "the order became invalid".into()
    } else {
        format!("validation failed: {}", out.join("; "))
    }
}
