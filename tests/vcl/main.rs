//! VCL end to end and at check time, one binary: real origins and the real proxy running VCL
//! files (one module per idea), the checker's words, and Varnish's own test suite parsed.

#[path = "../common/mod.rs"]
mod common;

mod backend_errors;
mod cache;
mod check;
mod check_field;
mod constructs;
mod directors;
mod features;
mod field;
mod fields;
mod operation;
mod parse;
mod records;
mod sessions;
mod sites;
mod status_lines;
mod storages;
mod unused_bodies;
mod variables;
mod varnish;

use common::vcl::start_vcl;
use common::{Origin, Resp, Shellac, get, request};

/// A VCL node running `vcl` (named `name`) in front of `origin`, for one `GET /`: its answer
/// (the node is stopped before it is returned).
pub(crate) async fn get_once(name: &str, vcl: &str, origin: &Origin) -> Resp {
    let shellac = start_vcl(name, vcl, &[origin.addr]).await;
    let r = get(shellac.addr, "/").await;
    shellac.stop().await;
    r
}

/// The backend's health as the admin API reports it.
pub(crate) async fn healthy(shellac: &Shellac, name: &str) -> bool {
    let resp = request(shellac.admin, "GET", "/backends", &[], b"").await;
    let v: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no backend {name}: {v}"))["healthy"]
        .as_bool()
        .unwrap()
}

pub(crate) async fn wait_health(shellac: &Shellac, name: &str, want: bool) {
    for _ in 0..400 {
        if healthy(shellac, name).await == want {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!(
        "{name} never became {}",
        if want { "healthy" } else { "sick" }
    );
}
