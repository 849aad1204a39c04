//! Client certificates checked against revocation lists (`[[tls]] client_crl`): a revoked
//! certificate is refused and counted (a resumed session too: its certificate is checked again
//! against the lists in force), a replaced list is used without a reload, the admin
//! API shows each list, and a list that is past its next update, not PEM, or set without
//! `client_ca` is named with its file and key by `shellac check` and refused by `serve`.

use crate::common;

use std::sync::Arc;

use crate::common::tls::{Pki, all_versions, connect, refused, tls_table};
use crate::common::{Conn, Origin, Reply, Shellac, until_stats};
use shellac::config::Config;

async fn origin() -> Origin {
    Origin::start(|seen| Reply::ok(&format!("body of {}", seen.path)).cc("max-age=60")).await
}

/// Whether a client with `client` gets an answer over a new connection.
async fn answered(addr: std::net::SocketAddr, client: &Arc<rustls::ClientConfig>) -> bool {
    let Ok(stream) = connect(addr, client, "site.test").await else {
        return false;
    };
    let mut conn = Conn::over(stream).await;
    conn.send("GET", "/r", &[("host", "site.test")], b"")
        .await
        .status
        == 200
}

#[tokio::test]
async fn revoked_client_certificates_are_refused_and_new_lists_are_picked_up() {
    let pki = Pki::new("crl");
    let cert = pki.leaf("site", &["site.test"]);
    let alice = pki.client_serial("alice", "alice", 1001);
    let bob = pki.client_serial("bob", "bob", 1002);
    let crl = pki.crl("clients.crl.pem", &[1002], 2099);
    let origin = origin().await;
    let extra = format!(
        "client_ca = \"{}\"\nclient_crl = \"{}\"\nwatch_interval = \"100ms\"",
        pki.ca_file.display(),
        crl.display()
    );
    let text = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], &extra)
    );
    let parsed = Config::parse(&text, "t.toml").unwrap();
    let sh = Shellac::start(origin.addr, |c| c.tls = parsed.tls).await;
    let addr = sh.tls_addrs()[0];
    let as_alice = Arc::new(pki.client_config_with(&all_versions(), Some(&alice)));
    let as_bob = Arc::new(pki.client_config_with(&all_versions(), Some(&bob)));

    assert!(answered(addr, &as_alice).await, "alice is not revoked");
    // Her second connection resumes the first's session.
    assert!(answered(addr, &as_alice).await);
    until_stats(&sh, "a resumed session", |s| {
        s["tls_handshake_resumed"] == 1
    })
    .await;
    assert!(refused(addr, &as_bob).await, "bob's certificate is revoked");
    until_stats(&sh, "the revoked refusal", |s| {
        s["tls_handshake_fail_client_cert_revoked"] == 1
    })
    .await;
    assert_eq!(sh.stats().await["tls_handshake_fail_client_cert"], 0);

    // The admin API shows the list.
    let v: serde_json::Value =
        serde_json::from_slice(&common::get(sh.admin, "/tls").await.body).unwrap();
    let list = &v["listeners"][0]["client_crls"][0];
    assert_eq!(list["revoked"], 1, "{v:#}");
    assert!(
        list["issuer"]
            .as_str()
            .unwrap()
            .contains("Shellac test CA crl")
    );
    assert!(list["next_update"].as_str().unwrap().contains("2099"));

    // A new list revoking alice too, written as a CA's publishing job would (a new file
    // renamed over the old one): used within a few watch intervals, without a reload.
    let next = pki.crl("next.crl.pem", &[1001, 1002], 2099);
    std::fs::rename(&next, &crl).unwrap();
    until_stats(&sh, "the new list", |s| s["tls_reload"] == 1).await;
    // Her client offers the session of before (resumption skips the certificate exchange):
    // the certificate it carries is checked against the lists in force now.
    assert!(refused(addr, &as_alice).await, "alice is revoked now");
    until_stats(&sh, "both refusals", |s| {
        s["tls_handshake_fail_client_cert_revoked"] == 2
    })
    .await;

    // A half-written list is an error; the running one stays in force.
    std::fs::write(&crl, "-----BEGIN X509 CRL-----\nMIIB").unwrap();
    until_stats(&sh, "the load error", |s| s["tls_reload_error"] == 1).await;
    assert!(refused(addr, &as_alice).await, "the list in force is kept");
}

#[tokio::test]
async fn check_names_every_revocation_list_problem() {
    let pki = Pki::new("crl-check");
    let cert = pki.leaf("site", &["site.test"]);
    let expired = pki.crl("expired.crl.pem", &[7], 2021);
    let junk = common::tls::write(&pki.dir, "junk.crl.pem", "not a list\n");
    let config = |extra: &str| {
        format!(
            "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
            tls_table(&[&cert], extra)
        )
    };
    let ca = format!("client_ca = \"{}\"", pki.ca_file.display());

    let text = config(&format!("{ca}\nclient_crl = [\"{}\"]", expired.display()));
    let parsed = Config::parse(&text, "t.toml").unwrap();
    let (errors, _) = shellac::preflight::check_machine(&parsed, &text, "t.toml");
    let messages: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{messages:#?}");
    assert!(
        messages[0].contains("client_crl")
            && messages[0].contains(&format!("{}:", expired.display()))
            && messages[0].contains("expired on Fri, 01 Jan 2021"),
        "{messages:#?}"
    );
    assert!(
        messages[0].contains("t.toml:"),
        "names the file: {messages:#?}"
    );
    let err = shellac::server::start(Arc::new(parsed))
        .await
        .err()
        .expect("serve refuses what check refuses");
    assert!(err.to_string().contains("expired on"), "{err}");

    let text = config(&format!("{ca}\nclient_crl = [\"{}\"]", junk.display()));
    let parsed = Config::parse(&text, "t.toml").unwrap();
    let (errors, _) = shellac::preflight::check_machine(&parsed, &text, "t.toml");
    let messages: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert!(
        messages.len() == 1 && messages[0].contains("holds no revocation list"),
        "{messages:#?}"
    );

    // Without client_ca there is nothing to check a list against.
    let text = config(&format!("client_crl = \"{}\"", expired.display()));
    let errors = Config::parse(&text, "t.toml").unwrap_err();
    let message = format!("{errors:?}");
    assert!(message.contains("needs `client_ca`"), "{message}");
}
