//! Certificate revocation lists for client certificates (`[[tls]] client_crl`): PEM files
//! read and checked the way an operator needs them checked — every problem one sentence
//! naming the file — and what each list says about itself for the admin API.

use std::path::{Path, PathBuf};

use rustls::pki_types::CertificateRevocationListDer;
use rustls::pki_types::pem::PemObject;

use super::certs::{format_time, read};
use super::der::{self, CrlFacts};

/// One revocation list: its DER for the verifier, and its facts.
#[derive(Clone, Debug)]
pub struct Crl {
    pub file: PathBuf,
    pub der: CertificateRevocationListDer<'static>,
    pub facts: CrlFacts,
}

/// The revocation lists of a PEM file (`-----BEGIN X509 CRL-----` blocks), checked to be
/// valid and current at `now` (seconds since the epoch): a list past its next update would
/// refuse every certificate it covers, so it is an error here, where a reload keeps the
/// running lists, rather than a surprise at the next handshake.
pub fn load(path: &Path, now: i64) -> Result<Vec<Crl>, String> {
    let pem = read(path, "revocation list")?;
    let ders: Result<Vec<_>, _> = CertificateRevocationListDer::pem_slice_iter(&pem).collect();
    let ders = ders.map_err(|e| format!("{}: not a valid PEM file ({e})", path.display()))?;
    if ders.is_empty() {
        return Err(format!(
            "{}: holds no revocation list (a PEM block `-----BEGIN X509 CRL-----`)",
            path.display()
        ));
    }
    let mut out = Vec::with_capacity(ders.len());
    for der in ders {
        let facts = der::parse_crl(der.as_ref()).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(next) = facts.next_update
            && next < now
        {
            return Err(format!(
                "{}: the revocation list of {} expired on {} (its next update); every client \
                 certificate it covers would be refused: install a current one",
                path.display(),
                facts.issuer,
                format_time(next)
            ));
        }
        out.push(Crl {
            file: path.to_path_buf(),
            der,
            facts,
        });
    }
    Ok(out)
}

/// Every list of `paths`, in order.
pub fn load_all(paths: &[PathBuf], now: i64) -> Result<Vec<Crl>, String> {
    let mut out = Vec::new();
    for p in paths {
        out.extend(load(p, now)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        CertificateParams, CertificateRevocationListParams, IsCa, KeyIdMethod, KeyPair,
        RevocationReason, RevokedCertParams, SerialNumber,
    };

    const Y2020: i64 = 1_577_836_800;
    const Y2030: i64 = 1_893_456_000;
    const NOW: i64 = 1_800_000_000; // 2027

    /// A CA and a CRL it signs revoking serial 7, valid from January 1st of `this` to January
    /// 1st of `next`.
    fn crl_pem(this: i32, next: i32) -> String {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let ca = params.self_signed(&key).unwrap();
        let at = |year: i32| rcgen::date_time_ymd(year, 1, 1);
        let crl = CertificateRevocationListParams {
            this_update: at(this),
            next_update: at(next),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: vec![RevokedCertParams {
                serial_number: SerialNumber::from(7u64),
                revocation_time: at(this),
                reason_code: Some(RevocationReason::KeyCompromise),
                invalidity_date: None,
            }],
            key_identifier_method: KeyIdMethod::Sha256,
        }
        .signed_by(&ca, &key)
        .unwrap();
        crl.pem().unwrap()
    }

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shellac-crl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_current_list_loads_with_its_facts() {
        let p = file("current.pem", &crl_pem(2020, 2030));
        let crls = load(&p, NOW).unwrap();
        assert_eq!(crls.len(), 1);
        assert_eq!(crls[0].facts.issuer, "CN=Test CA");
        assert_eq!(crls[0].facts.this_update, Y2020);
        assert_eq!(crls[0].facts.next_update, Some(Y2030));
        assert_eq!(crls[0].facts.revoked, 1);
    }

    #[test]
    fn problems_name_the_file() {
        let now = NOW;
        let expired = file("expired.pem", &crl_pem(2020, 2021));
        let e = load(&expired, now).unwrap_err();
        assert!(
            e.contains("expired.pem")
                && e.contains("expired on Fri, 01 Jan 2021")
                && e.contains("CN=Test CA"),
            "{e}"
        );
        let empty = file("empty.pem", "nothing here\n");
        let e = load(&empty, now).unwrap_err();
        assert!(e.contains("empty.pem: holds no revocation list"), "{e}");
        let missing = std::env::temp_dir().join("shellac-no-such-crl.pem");
        let e = load(&missing, now).unwrap_err();
        assert!(e.contains("no such file"), "{e}");
    }

    /// Every prefix and one-byte change of a real list parses or errs, never panics.
    #[test]
    fn hostile_input_never_panics() {
        let pem = crl_pem(2020, 2030);
        let der = CertificateRevocationListDer::from_pem_slice(pem.as_bytes()).unwrap();
        let der = der.as_ref().to_vec();
        for n in 0..der.len() {
            let _ = der::parse_crl(&der[..n]);
        }
        for i in 0..der.len() {
            let mut d = der.clone();
            d[i] ^= 0xff;
            let _ = der::parse_crl(&d);
        }
    }
}
