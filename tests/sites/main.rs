//! Virtual hosts (`[[site]]`, issue 31) end to end, with real origins: a site is picked from
//! the listener and the Host with nginx's precedence, an unknown name without a default gets
//! 421, each site routes to its own backend under its own rules, rewrites run before the
//! cache key, and a reload adds, changes and removes sites while a client connection stays open;
//! `tls`: sites behind `[[tls]]` listeners.
//! The shared helpers are here; the tests in `choosing`, `settings`, `observing`, `files`,
//! `rewrites` and `tls` (test names `MODULE::NAME`).

mod choosing;
#[path = "../common/mod.rs"]
mod common;
mod files;
mod observing;
mod rewrites;
mod settings;
mod tls;

use std::path::Path;

use common::*;

/// An origin answering its own name (and the path it was asked for), cacheable.
async fn named(name: &'static str) -> Origin {
    Origin::start(move |seen| Reply::ok(&format!("{name} {}", seen.path)).cc("max-age=600")).await
}

fn backend(name: &str, origin: &Origin) -> String {
    format!(
        "[[backend]]\nname = \"{name}\"\nhost = \"127.0.0.1\"\nport = {}\n",
        origin.addr.port()
    )
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

const SERVER: &str =
    "[server]\nlisten = [\"127.0.0.1:0\", \"127.0.0.2:0\"]\nadmin = \"127.0.0.1:0\"\n";

async fn get_host(addr: std::net::SocketAddr, host: &str, path: &str) -> Resp {
    get_with(addr, path, &[("host", host)]).await
}
