//! `[[backend]] protocol = "files"`: static files from a document root behind the same cache
//! policy as any origin — types, validators, conditionals and ranges (cached and passed),
//! index files, precompressed siblings, and the refusals that keep requests inside the root.
//! The document root and the helpers are here; the tests in `serving`, `refusals`,
//! `sendfile`, `routing`, `scripts`, `copies`, `default_type`, `open_file_cache`, `precompressed` and `seeks` (test
//! names `MODULE::NAME`).

#[path = "../common/mod.rs"]
mod common;
mod copies;
mod default_type;
mod open_file_cache;
mod precompressed;
mod refusals;
mod routing;
mod scripts;
mod seeks;
mod sendfile;
mod serving;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::binary::BIN;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-ROOT";

/// A document root (`www/`) next to a file outside it (`secret.txt`).
fn site() -> TempDir {
    let dir = TempDir::new("files");
    let www = dir.0.join("www");
    let w = |p: &str, body: &[u8]| {
        let path = www.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_old(&path, body);
    };
    w("app.js", b"console.log(1);\n");
    w("mod.mjs", b"export {};\n");
    w("data.json", b"{\"a\":1}");
    w("text.txt", b"0123456789abcdefghijklmnopqrstuvwxyz");
    w("docs/index.html", b"<h1>docs</h1>");
    w("empty/.keep", b"");
    w(".env", b"PASSWORD=1");
    w(".well-known/security.txt", b"Contact: x");
    w("style.css", b"body{color:red}");
    w("style.css.gz", b"GZIP-BYTES");
    w("style.css.br", b"BROTLI-BYTES");
    w("noext", b"raw");
    std::fs::write(dir.0.join("secret.txt"), SECRET).unwrap();
    std::os::unix::fs::symlink(dir.0.join("secret.txt"), www.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(www.join("text.txt"), www.join("inside.txt")).unwrap();
    dir
}

/// Writes `body` to `path`, modified long ago (2020): the Last-Modified heuristic keeps a
/// cached copy fresh for months, so whether a request is a hit or a revalidation never depends
/// on the test's timing.
fn write_old(path: &Path, body: &[u8]) {
    std::fs::write(path, body).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_577_836_800))
        .unwrap();
}

async fn files(root: &Path, tweak: impl FnOnce(&mut shellac::config::BackendConfig)) -> Shellac {
    Shellac::start_files(root, |c| {
        let b = &mut c.backends[0];
        b.precompressed = true;
        tweak(b);
        // `X-Pass: 1`: the request is passed (never cached), so the files origin itself
        // answers its conditionals and ranges.
        c.rules.push(pass_rule());
    })
    .await
}

/// A passed request: the origin itself answers conditionals and ranges.
const PASS: (&str, &str) = ("x-pass", "1");

/// The rule that passes a request with an `X-Pass` header ([`PASS`]).
fn pass_rule() -> shellac::config::rules::RuleConfig {
    let mut pass = shellac::config::rules::RuleConfig::default();
    pass.request_header.insert("x-pass".into(), String::new());
    pass.pass = true;
    pass
}
