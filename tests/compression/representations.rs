//! br and zstd representations of hot objects, built in the background (none when no
//! encodings are configured), read back from the disk tier, and an identity representation
//! of a hot gzip object.

use super::*;

/// Hot objects get br and zstd representations built in the background (issue 29): the
/// first hits by a client that prefers br get gzip (nothing is compressed on the request
/// path), then br — with a weak ETag, `Vary`, its own length and Range over its bytes; a
/// zstd client likewise, in a window of at most 8 MB; gzip and identity clients are served
/// as before; a purge of the URL takes the representations with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_objects_get_br_and_zstd_representations_built_in_the_background() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let stored = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    let first = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip, br")]).await;
    assert!(is_gzip_page(&first), "not built on the request path");
    let br = until_coded(&shellac, "/hot", "gzip, deflate, br", "br").await;
    assert_eq!(
        br.header("content-encoding"),
        Some("br"),
        "{:?}",
        br.headers
    );
    let mut identity = Vec::new();
    brotli::Decompressor::new(&br.body[..], 4096)
        .read_to_end(&mut identity)
        .expect("valid br");
    assert_eq!(identity, page().as_bytes());
    assert!(br.body.len() < stored.body.len(), "smaller than the gzip");
    assert_eq!(br.header("etag"), Some("W/\"v1\""));
    assert!(varies_on_coding(&br));
    assert_eq!(
        br.header("content-length"),
        Some(&*br.body.len().to_string())
    );
    let r = get_with(
        shellac.addr,
        "/hot",
        &[("accept-encoding", "br"), ("range", "bytes=0-9")],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(r.body, br.body[..10]);
    assert_eq!(
        r.header("content-range"),
        Some(&*format!("bytes 0-9/{}", br.body.len()))
    );

    let zstd = until_coded(&shellac, "/hot", "gzip, deflate, br, zstd", "zstd").await;
    assert_eq!(zstd.header("content-encoding"), Some("zstd"));
    let mut d = zstd::stream::Decoder::new(&zstd.body[..]).unwrap();
    d.window_log_max(23).unwrap();
    let mut identity = Vec::new();
    d.read_to_end(&mut identity)
        .expect("zstd within an 8 MB window");
    assert_eq!(identity, page().as_bytes());

    // The others as before; a client that prefers gzip by q-value gets gzip.
    let gz = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.body, stored.body);
    let gz = get_with(
        shellac.addr,
        "/hot",
        &[("accept-encoding", "br;q=0.5, zstd;q=0.5, gzip")],
    )
    .await;
    assert_eq!(gz.body, stored.body);
    let id = get_with(shellac.addr, "/hot", &[]).await;
    assert!(is_identity_page(&id));
    assert_eq!(origin.count(), 1);
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_br"], 1);
    assert_eq!(stats["compress_zstd"], 1);
    assert_eq!(stats["compress_gzip"], 1);
    assert!(stats["compress_encoded_served"] >= 3);
    assert_eq!(stats["compress_encode_dropped"], 0);

    // A purge takes them with the object: the next br client gets the new gzip.
    let mut conn = Conn::open(shellac.addr).await;
    let purged = conn.send("PURGE", "/hot", &[], b"").await;
    assert_eq!(purged.status, 200);
    let after = get_with(shellac.addr, "/hot", &[("accept-encoding", "br, gzip")]).await;
    assert!(after.cache_status().contains("fwd=miss"));
    let after = get_with(shellac.addr, "/hot", &[("accept-encoding", "br, gzip")]).await;
    assert!(is_gzip_page(&after), "{:?}", after.headers);
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// `[compression] encodings = []`: nothing is built, br clients get gzip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_representations_when_no_encodings_are_configured() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |c| c.compression.encodings = Vec::new()).await;
    for _ in 0..4 {
        let r = get_with(
            shellac.addr,
            "/cold",
            &[("accept-encoding", "br, zstd, gzip")],
        )
        .await;
        assert!(is_gzip_page(&r));
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_br"] + stats["compress_zstd"], 0);
    assert!(
        stats["cache_hit_fast"] >= 1,
        "br clients stay on the fast path"
    );
    shellac.stop().await;
}

/// The disk tier at `path` (8 MiB, every object admitted).
fn on_disk(config: &mut shellac::config::Config, path: &std::path::Path) {
    config.storage.disk = Some(shellac::config::DiskConfig {
        path: path.to_path_buf(),
        size: shellac::config::units::Size(8 << 20),
        region_size: shellac::config::units::Size(1 << 20),
        admission: shellac::config::Admission::Always,
        on_open_error: Default::default(),
    });
}

/// Waits (bounded) until the disk tier has indexed at least `n` objects.
async fn wait_disk_objects(shellac: &Shellac, n: u64) {
    for _ in 0..400 {
        if shellac.stat("n_object_disk").await >= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the disk tier indexed fewer than {n} objects");
}

/// Representations live in the tiers like any body (issue 29): a br representation built
/// before a restart is read back from the disk tier for the first br client after it — the
/// same bytes, nothing built or fetched again (`compress_encoded_read_back`) — and promoted
/// to memory. An object stored identity under an older configuration (its type was not
/// listed then) gets br and gzip representations once `[compression]` lists it, each from
/// the identity bytes, with a weak ETag and `Vary`; identity clients still get it as stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn representations_are_read_back_from_disk_and_built_for_identity_objects() {
    let origin = Origin::start(|s| {
        let kind = if s.path == "/old" {
            "text/plain"
        } else {
            "text/html"
        };
        Reply::ok(&page())
            .cc("max-age=600")
            .header("content-type", kind)
            .header("etag", "\"v1\"")
    })
    .await;
    let dir = common::TempDir::new("compression-disk");
    let data = dir.path("cache.dat");
    let shellac = Shellac::start(origin.addr, |c| {
        on_disk(c, &data);
        c.compression.types = vec!["text/html".into()];
    })
    .await;
    let stored = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    let br = until_coded(&shellac, "/hot", "gzip, br", "br").await;
    assert_eq!(br.header("content-encoding"), Some("br"));
    let old = get_with(shellac.addr, "/old", &[("accept-encoding", "gzip, br")]).await;
    assert!(is_identity_page(&old), "text/plain is not listed yet");
    // /hot, its br representation and /old.
    wait_disk_objects(&shellac, 3).await;
    shellac.stop().await;

    let shellac = Shellac::start(origin.addr, |c| on_disk(c, &data)).await;
    let again = get_with(shellac.addr, "/hot", &[("accept-encoding", "gzip, br")]).await;
    assert_eq!(
        again.header("content-encoding"),
        Some("br"),
        "{:?}",
        again.headers
    );
    assert_eq!(again.body, br.body, "the stored representation");
    assert_eq!(again.header("etag"), Some("W/\"v1\""));
    let stats = shellac.stats().await;
    assert_eq!(stats["compress_encoded_read_back"], 1);
    assert_eq!(stats["compress_br"], 0, "nothing built again");
    // Promoted: the next one is served from memory.
    let from_memory = get_with(shellac.addr, "/hot", &[("accept-encoding", "br")]).await;
    assert_eq!(from_memory.body, br.body);
    assert_eq!(shellac.stat("compress_encoded_read_back").await, 1);

    // Stored identity before text/plain was listed: representations built now.
    let old_br = until_coded(&shellac, "/old", "gzip, br", "br").await;
    assert_eq!(old_br.header("content-encoding"), Some("br"));
    let mut identity = Vec::new();
    brotli::Decompressor::new(&old_br.body[..], 4096)
        .read_to_end(&mut identity)
        .expect("valid br");
    assert_eq!(identity, page().as_bytes());
    assert_eq!(old_br.header("etag"), Some("W/\"v1\""));
    assert!(varies_on_coding(&old_br));
    let old_gz = until_coded(&shellac, "/old", "gzip", "gzip").await;
    assert_eq!(gunzip(&old_gz.body), page().as_bytes());
    assert_eq!(old_gz.header("etag"), Some("W/\"v1\""));
    let old_id = get_with(shellac.addr, "/old", &[]).await;
    assert!(is_identity_page(&old_id));
    assert_eq!(old_id.header("etag"), Some("\"v1\""));
    assert_eq!(origin.count(), 2, "nothing fetched again");
    shellac.stop().await;
}

/// A hot stored gzip object gets an identity representation for clients without gzip
/// (bench/ab2009.sh "phpinfo cached by a rule": every such hit decoded the gzip): the first
/// hits are decoded as before, then one built in the background serves them as stored — the
/// identity's length and strong `ETag`, `Vary`, no decoding per hit (`compress_gunzip` stops
/// counting) — and a purge takes it with the object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_gzip_object_gets_an_identity_representation_for_clients_without_gzip() {
    let origin = page_origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let stored = get_with(shellac.addr, "/idhot", &[("accept-encoding", "gzip")]).await;
    assert!(is_gzip_page(&stored));
    let first = get_with(shellac.addr, "/idhot", &[]).await;
    assert!(is_identity_page(&first), "{:?}", first.headers);
    let mut built = false;
    for _ in 0..200 {
        let r = get_with(shellac.addr, "/idhot", &[]).await;
        assert!(is_identity_page(&r), "{:?}", r.headers);
        if shellac.stat("compress_identity").await == 1 {
            built = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(built, "an identity representation is built");
    let decoded = shellac.stat("compress_gunzip").await;
    let served = shellac.stat("compress_encoded_served").await;
    for _ in 0..3 {
        let r = get_with(shellac.addr, "/idhot", &[]).await;
        assert!(is_identity_page(&r), "{:?}", r.headers);
        assert_eq!(
            r.header("etag"),
            Some("\"v1\""),
            "the identity's strong ETag"
        );
        assert_eq!(r.header("content-length"), Some(&*page().len().to_string()));
        assert!(varies_on_coding(&r));
    }
    assert_eq!(
        shellac.stat("compress_gunzip").await,
        decoded,
        "no decoding per hit"
    );
    assert_eq!(shellac.stat("compress_encoded_served").await, served + 3);
    // Gzip clients still get the stored gzip.
    let gz = get_with(shellac.addr, "/idhot", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.body, stored.body);
    // A range over it is over the identity bytes.
    let r = get_with(shellac.addr, "/idhot", &[("range", "bytes=0-9")]).await;
    assert_eq!(r.status, 206);
    assert_eq!(r.body, page().as_bytes()[..10]);
    assert_eq!(origin.count(), 1);
    let mut conn = Conn::open(shellac.addr).await;
    assert_eq!(conn.send("PURGE", "/idhot", &[], b"").await.status, 200);
    let after = get_with(shellac.addr, "/idhot", &[]).await;
    assert!(after.cache_status().contains("fwd=miss"));
    assert!(is_identity_page(&after));
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}
