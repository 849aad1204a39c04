//! Vary (RFC 9111 §4.1): one stored object per variant; `Vary: *` never matches;
//! Accept-Encoding normalised so trivial differences share a variant.

mod common;

use common::*;

fn lang_origin() -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    |s| {
        let lang = s
            .headers
            .get("accept-language")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        Reply::ok(&format!("lang={lang}"))
            .cc("max-age=60")
            .header("vary", "Accept-Language")
    }
}

/// RFC 9111 §4.1: each variant is stored and selected by the request's field values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_variant_is_stored_and_selected() {
    let origin = Origin::start(lang_origin()).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for lang in ["fr", "de", "fr", "de", "en"] {
        let r = get_with(shellac.addr, "/", &[("accept-language", lang)]).await;
        assert_eq!(r.text(), format!("lang={lang}"));
    }
    assert_eq!(origin.count(), 3, "fr, de, en fetched once each");
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_hit"], 2);
    assert_eq!(stats["n_object"], 3);
    // A request without the field is its own variant.
    assert_eq!(get(shellac.addr, "/").await.text(), "lang=");
    assert_eq!(origin.count(), 4);
    shellac.stop().await;
}

/// RFC 9111 §4.1: "A stored response with a Vary header field value containing a member "*"
/// always fails to match."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_star_never_matches() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=60").header("vary", "*")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/").await;
    let r = get(shellac.addr, "/").await;
    assert!(
        r.cache_status().contains("detail=vary-star"),
        "{}",
        r.cache_status()
    );
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// Accept-Encoding normalisation: spelling differences share one variant, and the backend is
/// asked with the normalised value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_encoding_is_normalised() {
    let origin = Origin::start(|s| {
        let ae = s
            .headers
            .get("accept-encoding")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        Reply::ok(&format!("ae={ae}"))
            .cc("max-age=60")
            .header("vary", "Accept-Encoding")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    assert_eq!(
        get_with(
            shellac.addr,
            "/",
            &[("accept-encoding", "gzip, deflate, br")]
        )
        .await
        .text(),
        "ae=gzip"
    );
    let r = get_with(shellac.addr, "/", &[("accept-encoding", "deflate, gzip")]).await;
    assert_eq!(r.text(), "ae=gzip");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(
        get_with(shellac.addr, "/", &[("accept-encoding", "identity")])
            .await
            .text(),
        "ae="
    );
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// PURGE-like invalidation reaches every variant (RFC 9111 §4.4: invalidation of the URI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidation_removes_all_variants() {
    let origin = Origin::start(|s| {
        if s.method == "POST" {
            return Reply::ok("posted");
        }
        let lang = s
            .headers
            .get("accept-language")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        Reply::ok(&format!("lang={lang}"))
            .cc("max-age=60")
            .header("vary", "Accept-Language")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for lang in ["fr", "de"] {
        get_with(shellac.addr, "/", &[("accept-language", lang)]).await;
    }
    request(shellac.addr, "POST", "/", &[], b"x").await;
    assert_eq!(shellac.stat("cache_invalidated").await, 2);
    for lang in ["fr", "de"] {
        assert!(
            get_with(shellac.addr, "/", &[("accept-language", lang)])
                .await
                .cache_status()
                .contains("fwd=miss")
        );
    }
    shellac.stop().await;
}
