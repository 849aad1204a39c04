//! Varnish's storages in VCL (`[[storage.named]]`, docs/vcl.md "Storage"): `beresp.storage`,
//! `beresp.storage_hint`, `obj.storage`, `storage.NAME` and its figures, and the checker's
//! refusal of a storage the configuration does not declare.

use crate::common;

use common::compile::ok;
use common::{Origin, Reply, get};

/// `beresp.storage = storage.Transient` (5.1+), `beresp.storage_hint = "Transient"` (4.x) and
/// 3.0's `set beresp.storage = "Transient";` were refused. Accepted, with Varnish's meaning as
/// Shellac can give it: a transient object is kept in the memory tier only — never written to
/// the disk tier (nor the shared tier) — and `obj.storage` says so, as Varnish prints a
/// storage (`storage.Transient`). `storage.s0` is the memory tier itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beresp_storage_transient_keeps_an_object_in_memory_only() {
    let origin = Origin::start(|_| Reply::ok(&"x".repeat(3000)).cc("max-age=3600")).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    if (bereq.url ~ "^/transient") {
        set beresp.storage = storage.Transient;
    } elsif (bereq.url ~ "^/hint") {
        set beresp.storage_hint = "Transient";
    } else {
        set beresp.storage = storage.s0;
    }
    set beresp.http.x-storage = beresp.storage;
}
sub vcl_deliver { set resp.http.x-obj-storage = obj.storage; }
"#;
    let dir = common::TempDir::new("vcl-transient");
    let data = dir.path("cache.dat");
    let shellac = common::vcl::start_vcl_with("transient", vcl, &[origin.addr], |c| {
        c.storage.disk = Some(shellac::config::DiskConfig {
            path: data.clone(),
            size: shellac::config::units::Size(8 << 20),
            region_size: shellac::config::units::Size(1 << 20),
            admission: shellac::config::Admission::Always,
            on_open_error: Default::default(),
        });
    })
    .await;
    for (path, named) in [
        ("/transient", "storage.Transient"),
        ("/hint", "storage.Transient"),
        ("/s0", "storage.s0"),
    ] {
        let first = get(shellac.addr, path).await;
        assert_eq!(first.header("x-storage"), Some(named), "{path}");
        assert_eq!(
            first.header("x-obj-storage"),
            Some(named),
            "{path}: the miss"
        );
        let hit = get(shellac.addr, path).await;
        assert!(
            hit.cache_status().contains("hit"),
            "{path}: {}",
            hit.cache_status()
        );
        assert_eq!(hit.header("x-obj-storage"), Some(named), "{path}");
    }
    assert_eq!(shellac.stat("disk_transient").await, 2);
    // The one object not transient reaches the disk tier; the two transient ones never do.
    for _ in 0..400 {
        if shellac.stat("n_object_disk").await >= 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(shellac.stat("n_object_disk").await, 1);
    assert_eq!(origin.count(), 3);
    shellac.stop().await;
    origin.stop();
    // 3.0 names it with a string.
    ok("backend b { .host = \"127.0.0.1\"; }\n\
        sub vcl_fetch { set beresp.storage = \"Transient\"; }");
}

/// `set beresp.storage = storage.images;` puts the object in the `[[storage.named]]` images,
/// held to its size; `storage.images.used_space` / `.free_space` read what it holds and can
/// take, `.happy` is true; `beresp.storage` reads `storage.s0` by default and
/// `storage.Transient` for a pass, as Varnish's do (trunk v00052).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beresp_storage_names_a_configured_storage_and_its_figures_read_it() {
    let origin = Origin::start(|s| {
        let body = if s.path.starts_with("/img/") {
            "i".repeat(64 << 10)
        } else {
            "page".to_string()
        };
        Reply::ok(&body).cc("max-age=3600")
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { if (req.url ~ "^/pass") { return (pass); } }
sub vcl_backend_response {
    set beresp.http.x-default = beresp.storage;
    if (bereq.url ~ "^/img/") {
        set beresp.storage = storage.images;
    }
}
sub vcl_deliver {
    set resp.http.x-obj-storage = obj.storage;
    set resp.http.x-used = storage.images.used_space;
    set resp.http.x-free = storage.images.free_space;
    set resp.http.x-happy = storage.images.happy;
    set resp.http.x-some = storage.images.used_space > 64KB;
}
"#;
    let shellac = common::vcl::start_vcl_with("named", vcl, &[origin.addr], |c| {
        c.storage.named = vec![shellac::config::NamedStorage {
            name: "images".into(),
            size: Some(shellac::config::units::Size(256 << 10)),
        }];
    })
    .await;
    let page = get(shellac.addr, "/page").await;
    assert_eq!(page.header("x-default"), Some("storage.s0"));
    assert_eq!(page.header("x-obj-storage"), Some("storage.s0"));
    assert_eq!(page.header("x-used"), Some("0"), "nothing in images yet");
    assert_eq!(page.header("x-free"), Some("262144"));
    assert_eq!(page.header("x-happy"), Some("true"));
    let pass = get(shellac.addr, "/pass").await;
    assert_eq!(pass.header("x-default"), Some("storage.Transient"));
    assert_eq!(pass.header("x-obj-storage"), Some("storage.Transient"));
    for i in 0..6 {
        let r = get(shellac.addr, &format!("/img/{i}")).await;
        assert_eq!(r.header("x-obj-storage"), Some("storage.images"));
    }
    let hit = get(shellac.addr, "/img/5").await;
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(hit.header("x-obj-storage"), Some("storage.images"));
    let used: u64 = hit.header("x-used").unwrap().parse().unwrap();
    let free: u64 = hit.header("x-free").unwrap().parse().unwrap();
    assert!((64 << 10..=256 << 10).contains(&used), "used {used}");
    assert_eq!(used + free, 256 << 10, "used {used} free {free}");
    assert_eq!(hit.header("x-some"), Some("true"));
    let stores: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/storages").await.body).unwrap();
    let images = stores
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "images"))
        .unwrap();
    assert_eq!(images["stored"], 6, "{stores}");
    assert_eq!(images["bytes"], used, "{stores}");
    assert!(images["evicted"].as_u64().unwrap() >= 3, "{stores}");
    // The page in s0 was not pushed out by the images.
    let again = get(shellac.addr, "/page").await;
    assert!(
        again.cache_status().contains("hit"),
        "{}",
        again.cache_status()
    );
    shellac.stop().await;
    origin.stop();
}

/// `shellac check` refuses a `storage.NAME` the configuration does not declare, with the file
/// and line and Varnish's words (`Symbol not found: 'storage.foo'`, trunk v00020); `s0`,
/// `Transient` (any letter case) and the declared ones are accepted; a figure that is none
/// is refused.
#[test]
fn a_storage_the_configuration_does_not_declare_is_refused() {
    let dir = common::TempDir::new("vcl-storage-check");
    let path = dir.path("site.vcl");
    let check = |vcl: &str| {
        std::fs::write(
            &path,
            format!("vcl 4.1;\nbackend b {{ .host = \"127.0.0.1\"; }}\n{vcl}"),
        )
        .unwrap();
        let mut config = shellac::config::Config::embedded_default();
        config.storage.named = vec![shellac::config::NamedStorage {
            name: "images".into(),
            size: None,
        }];
        shellac::vcl::attach::attach_file(&mut config, &path)
            .map(|_| ())
            .map_err(|e| {
                e.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
    };
    assert_eq!(
        check(
            "sub vcl_backend_response { set beresp.storage = storage.images; if (storage.s0.happy && storage.transient.free_space > 1MB) { set beresp.storage = storage.Transient; } }"
        ),
        Ok(())
    );
    let e =
        check("sub vcl_backend_response {\n  set beresp.storage = storage.foo;\n}").unwrap_err();
    assert!(e.contains("Symbol not found: 'storage.foo'"), "{e}");
    assert!(e.contains("site.vcl:4"), "{e}");
    assert!(e.contains("s0, Transient, images"), "{e}");
    let e = check("sub vcl_recv { if (storage.images.sad) { } }").unwrap_err();
    assert!(e.contains("storage.images.sad"), "{e}");
}

/// The `bytes` of storage `name` in `/storages`, and its `objects`.
async fn storage_figures(shellac: &common::Shellac, name: &str) -> (u64, u64) {
    let rows: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/storages").await.body).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name}: {rows}"));
    (
        row["bytes"].as_u64().unwrap(),
        row["objects"].as_u64().unwrap_or(0),
    )
}

/// Regression (trunk v00033: `storage.Transient.used_space > 0B` in the vcl_deliver of the
/// miss that stores its object there): a fill under way is charged to its storage as Varnish
/// allocates during the fetch — its head before the client's response goes out, then its
/// body as it arrives — and the charge gives way to the stored object's. Shellac charged a
/// storage only when the fill, complete, inserted its object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varnish_v00033_a_fill_under_way_is_charged_to_its_storage() {
    let origin = common::raw_origin::GatedOrigin::start(
        Box::leak(
            format!(
                "HTTP/1.1 200 OK\r\ncache-control: max-age=3600\r\ncontent-length: 2000\r\n\r\n{}",
                "a".repeat(1000)
            )
            .into_boxed_str(),
        )
        .as_bytes(),
        Box::leak("b".repeat(1000).into_boxed_str()).as_bytes(),
    )
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    set beresp.http.x-before = storage.Transient.used_space;
    set beresp.storage = storage.Transient;
}
sub vcl_deliver { set resp.http.x-used = storage.Transient.used_space > 0B; }
"#;
    let shellac = common::vcl::start_vcl("v00033-fill", vcl, &[origin.addr]).await;
    let addr = shellac.addr;
    let client = tokio::spawn(async move { get(addr, "/big").await });
    // The fill holds the head and the first 1000 bytes; nothing is stored yet.
    let mut seen = (0, 0);
    for _ in 0..400 {
        seen = storage_figures(&shellac, "Transient").await;
        if seen.0 >= 1000 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let (filling, objects) = seen;
    assert!(filling >= 1000, "{seen:?}");
    assert_eq!(objects, 0, "not stored yet");
    // The memory tier's row counts it too; its charged bytes (`cache_bytes`, what its bound
    // is held to) do not.
    let (s0, _) = storage_figures(&shellac, "s0").await;
    let charged = shellac.stat("cache_bytes").await;
    assert!(s0 >= charged + filling, "{s0} < {charged} + {filling}");
    origin.go.notify_one();
    let r = client.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 2000);
    assert_eq!(r.header("x-before"), Some("0"));
    assert_eq!(r.header("x-used"), Some("true"));
    // Stored: the object's charge, the fill's gone.
    let mut stored = (0, 0);
    for _ in 0..400 {
        stored = storage_figures(&shellac, "Transient").await;
        if stored.1 == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(stored.1, 1, "{stored:?}");
    assert!(stored.0 >= 2000, "{stored:?}");
    let (s0, _) = storage_figures(&shellac, "s0").await;
    assert_eq!(
        s0,
        shellac.stat("cache_bytes").await,
        "no fill left charged"
    );
    let hit = get(shellac.addr, "/big").await;
    assert_eq!(hit.body.len(), 2000);
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    shellac.stop().await;
}
