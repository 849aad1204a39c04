//! Regression: a VCL nested close to the parser's 200-level limit overflowed a runtime
//! worker's 2 MiB stack when a reload compiled it (or a request ran it), and the process
//! aborted; `shellac check` and `serve` parse on the main thread, so only a reload showed it.
//! The runtime's threads now have the main thread's 8 MiB.

use std::process::Command;

use crate::common::binary::{BIN, Served};
use crate::common::*;

/// `sub vcl_recv` with `depth` nested `if`s around `return (synth(299))`.
fn nested_ifs(depth: usize) -> String {
    format!(
        "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"9\"; }}\nsub vcl_recv {{ {}return (synth(299)); {} }}\n",
        "if (req.url) { ".repeat(depth),
        "}".repeat(depth)
    )
}

/// The same depth as parentheses around one comparison.
fn nested_parens(depth: usize) -> String {
    format!(
        "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"9\"; }}\nsub vcl_recv {{ if ({}req.url == \"/p\"{}) {{ return (synth(298)); }} }}\n",
        "(".repeat(depth),
        ")".repeat(depth)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_to_a_deeply_nested_vcl_does_not_overflow_a_worker() {
    let dir = temp_dir("reload-deep-vcl");
    let vcl = dir.join("policy.vcl");
    let config = dir.join("shellac.toml");
    std::fs::write(&vcl, nested_ifs(1)).unwrap();
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nadmin = \"127.0.0.1:0\"\n\n[vcl]\nfile = \"{}\"\n",
            vcl.display()
        ),
    )
    .unwrap();
    let node = Served::serve(&["--config", config.to_str().unwrap()]);
    assert_eq!(get(node.proxy, "/").await.status, 299);

    let admin = node.admin.to_string();
    for (name, text) in [("ifs", nested_ifs(190)), ("parens", nested_parens(190))] {
        std::fs::write(&vcl, &text).unwrap();
        let out = Command::new(BIN)
            .args(["reload", "--admin", &admin])
            .output()
            .expect("run shellac reload");
        assert!(
            out.status.success(),
            "{name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The process is alive and runs the new program on its workers.
        let r = get(node.proxy, "/p").await;
        assert!(
            [298, 299].contains(&r.status),
            "{name}: {} {}",
            r.status,
            r.text()
        );
    }
    node.stop();
    std::fs::remove_dir_all(&dir).ok();
}
