//! A real ACME server for tests: Debian's `pebble`, started once per test binary on loopback.
//!
//! Its configuration (JSON) goes to a temporary directory with an HTTPS certificate for
//! `127.0.0.1` from a test CA (`Pki`: that CA is what Shellac's `ca_root` trusts). Its
//! validation authority must reach the Shellac under test, and it connects to one fixed port
//! per challenge type (`httpPort`, `tlsPort`), so every test of the binary runs its Shellac on
//! [`Pebble::http_port`] / [`Pebble::tls_port`] and holds [`Pebble::lock`] meanwhile.
//! Those ports and pebble's own are below the kernel's ephemeral range, where no outgoing
//! connection of another process can take them between our probe and the bind.
//!
//! Environment: `PEBBLE_VA_NOSLEEP=1` (validate at once), `PEBBLE_VA_ALWAYS_VALID=0` (really
//! validate), `PEBBLE_WFE_NONCEREJECT=0` (no random bad nonces: a test must not depend on a
//! retry budget), `PEBBLE_AUTHZREUSE=0` (every order proves its names again).
//!
//! Pebble is stopped by its PID when the test binary exits (an `atexit` handler: the test
//! harness ends with `exit`), and by the kernel if the binary dies first (`PR_SET_PDEATHSIG`,
//! tied to a thread that lives as long as the process).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::tls::Pki;

/// The external account binding pebble requires of every new account (RFC 8555 §7.3.4), as
/// ZeroSSL or Google Trust Services do: [`Pebble::acme_table`] gives it.
pub const EAB_KID: &str = "kid-shellac";
pub const EAB_HMAC_KEY: &str = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";

/// A running pebble.
pub struct Pebble {
    /// The ACME directory URL.
    pub directory: String,
    /// The management API (roots, intermediates).
    pub management: SocketAddr,
    /// PEM file of the CA pebble's own HTTPS certificate chains to (Shellac's `ca_root`).
    pub ca_file: PathBuf,
    /// Where pebble's validation connects for HTTP-01 and TLS-ALPN-01 (on 127.0.0.1).
    pub http_port: u16,
    pub tls_port: u16,
    /// The test CA (kept: its directory holds `ca_file`).
    pki: Pki,
    /// One test at a time owns the validation ports.
    lock: tokio::sync::Mutex<()>,
}

static PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn stop_pebble() {
    let pid = PID.swap(0, Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: plain syscalls on the PID of the child this process started.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
}

impl Pebble {
    /// The binary's pebble, started on first use; None (the test skips) when pebble is not
    /// installed and tools are not required.
    pub fn get() -> Option<&'static Pebble> {
        static PEBBLE: OnceLock<Option<Pebble>> = OnceLock::new();
        PEBBLE.get_or_init(Pebble::start).as_ref()
    }

    fn start() -> Option<Pebble> {
        let found = std::path::Path::new("/usr/bin/pebble")
            .exists()
            .then_some(());
        super::tools::require(found, "pebble", "pebble")?;
        let pki = Pki::new("pebble");
        let (cert, key) = pki.leaf("pebble", &["127.0.0.1", "localhost"]);
        let ports = super::free_ports_below_ephemeral(4);
        let (acme, management, http_port, tls_port) = (ports[0], ports[1], ports[2], ports[3]);
        let config = serde_json::json!({
            "pebble": {
                "listenAddress": format!("127.0.0.1:{acme}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": cert,
                "privateKey": key,
                "httpPort": http_port,
                "tlsPort": tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": true,
                "externalAccountMACKeys": { EAB_KID: EAB_HMAC_KEY },
            }
        });
        let config_file = pki.dir.join("pebble-config.json");
        std::fs::write(&config_file, config.to_string()).unwrap();
        let log = std::fs::File::create(pki.dir.join("pebble.log")).unwrap();
        // Started from a thread that lives as long as the process, so that the kernel's
        // parent-death signal fires only when the process ends.
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = pki.dir.clone();
        std::thread::spawn(move || {
            let mut cmd = Command::new("/usr/bin/pebble");
            cmd.arg("-config")
                .arg(&config_file)
                .current_dir(&dir)
                .env("PEBBLE_VA_NOSLEEP", "1")
                .env("PEBBLE_VA_ALWAYS_VALID", "0")
                .env("PEBBLE_WFE_NONCEREJECT", "0")
                .env("PEBBLE_AUTHZREUSE", "0")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log);
            // SAFETY: prctl is async-signal-safe and touches only the child being started.
            unsafe {
                use std::os::unix::process::CommandExt;
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let child = cmd.spawn().expect("start pebble");
            PID.store(child.id() as i32, Ordering::SeqCst);
            // SAFETY: registers a plain extern "C" function with no captured state.
            unsafe {
                libc::atexit(stop_pebble);
            }
            let _ = tx.send(());
            // The child is reaped by stop_pebble; this thread only has to stay alive.
            std::mem::forget(child);
            loop {
                std::thread::park();
            }
        });
        rx.recv().expect("pebble started");
        let pebble = Pebble {
            directory: format!("https://127.0.0.1:{acme}/dir"),
            management: SocketAddr::from(([127, 0, 0, 1], management)),
            ca_file: pki.ca_file.clone(),
            http_port,
            tls_port,
            pki,
            lock: tokio::sync::Mutex::const_new(()),
        };
        // On a thread of its own: the caller may be inside a runtime.
        std::thread::scope(|s| {
            if s.spawn(|| pebble.wait_ready()).join().is_err() {
                panic!("pebble did not start:\n{}", pebble.log());
            }
        });
        Some(pebble)
    }

    /// Waits (at most 20 s) until the directory answers.
    fn wait_ready(&self) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let acme: SocketAddr = self
            .directory
            .trim_start_matches("https://")
            .trim_end_matches("/dir")
            .parse()
            .unwrap();
        rt.block_on(async {
            for _ in 0..200 {
                if let Ok(Ok(r)) = tokio::time::timeout(
                    Duration::from_secs(2),
                    https_get(acme, &self.pki.roots(), "/dir"),
                )
                .await
                    && r.contains("newOrder")
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let log = std::fs::read_to_string(self.pki.dir.join("pebble.log")).unwrap_or_default();
            panic!("pebble did not start:\n{log}");
        });
    }

    /// Holds the validation ports for one test.
    pub async fn lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.lock.lock().await
    }

    /// Pebble's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.pki.dir.join("pebble.log")).unwrap_or_default()
    }

    /// Trust anchors for the certificates pebble issues: its root, from the management API
    /// (made anew at each pebble start).
    pub async fn issuing_roots(&self) -> rustls::RootCertStore {
        let pem = https_get(self.management, &self.pki.roots(), "/roots/0")
            .await
            .expect("pebble's root");
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        assert!(!roots.is_empty(), "no root from pebble: {pem}");
        roots
    }

    /// The `[[tls.acme]]` table (inline) for `names` against this pebble.
    pub fn acme_table(
        &self,
        names: &[&str],
        challenge: &str,
        state_dir: &std::path::Path,
        extra: &str,
    ) -> String {
        let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        format!(
            "[[tls.acme]]\nnames = [{}]\nchallenge = \"{challenge}\"\ndirectory = \"{}\"\nca_root = \"{}\"\nstate_dir = \"{}\"\ncontact = \"ops@shellac.test\"\neab_kid = \"{EAB_KID}\"\neab_hmac_key = \"{EAB_HMAC_KEY}\"\n{extra}\n",
            names.join(", "),
            self.directory,
            self.ca_file.display(),
            state_dir.display()
        )
    }
}

/// `GET path` over HTTPS from `addr` (trusting `roots`): the body.
pub async fn https_get(
    addr: SocketAddr,
    roots: &rustls::RootCertStore,
    path: &str,
) -> Result<String, String> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots.clone())
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tls = shellac::tls::stream::TlsStream::from_parts(tcp, conn);
    tls.handshake().await.map_err(|e| e.to_string())?;
    let mut conn = super::Conn::over(tls).await;
    let resp = conn
        .send("GET", path, &[("host", &addr.to_string())], b"")
        .await;
    Ok(resp.text())
}
