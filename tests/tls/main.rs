//! TLS, one test binary (each module was a binary of its own): termination (`tls`), TLS to
//! backends (`tls_backend`), real clients such as curl, openssl, Python and testssl.sh
//! (`tls_clients`), and client certificates against revocation lists (`tls_revocation`).
//! Test names are `MODULE::NAME` (`cargo test --test tls tls_clients::`).

#[path = "../common/mod.rs"]
mod common;

mod operation;
mod tls;
mod tls_backend;
mod tls_clients;
mod tls_revocation;
