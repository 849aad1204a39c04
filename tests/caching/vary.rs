//! Vary (RFC 9111 §4.1): one stored object per variant; `Vary: *` never matches;
//! Accept-Encoding normalised so trivial differences share a variant.

use crate::common::*;

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

/// Accept-Encoding normalisation: spelling differences share one variant — one per coding
/// the client gets (zstd, br, gzip, identity) — and, without `[compression]` (which asks
/// for gzip and serves every client from one object), the backend is asked with the
/// normalised value.
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
    let shellac = Shellac::start(origin.addr, |c| c.compression.enabled = false).await;
    assert_eq!(
        get_with(
            shellac.addr,
            "/",
            &[("accept-encoding", "gzip, deflate, br")]
        )
        .await
        .text(),
        "ae=br"
    );
    let r = get_with(shellac.addr, "/", &[("accept-encoding", "BR, gzip;q=0.5")]).await;
    assert_eq!(r.text(), "ae=br");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    let r = get_with(shellac.addr, "/", &[("accept-encoding", "deflate, gzip")]).await;
    assert_eq!(r.text(), "ae=gzip");
    let r = get_with(shellac.addr, "/", &[("accept-encoding", "gzip, br, zstd")]).await;
    assert_eq!(r.text(), "ae=zstd");
    assert_eq!(
        get_with(shellac.addr, "/", &[("accept-encoding", "identity")])
            .await
            .text(),
        "ae="
    );
    assert_eq!(origin.count(), 4);
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

/// An origin that answers with the value of `field` it received, `Vary: field`, storable by a
/// shared cache (also with `Authorization`).
fn echo_origin(field: &'static str) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |s| {
        let v = s
            .headers
            .get(field)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        Reply::ok(&format!("{field}={v}"))
            .cc("public, max-age=60")
            .header("vary", field)
    }
}

/// Requests `/` with `field: stored`, then with `field: other`; whether the second was
/// answered from the first's stored response (and checks the body it got is its own when not).
async fn shares(field: &'static str, stored: &str, other: &str, normalise_ae: bool) -> bool {
    let origin = Origin::start(echo_origin(field)).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.normalize_accept_encoding = normalise_ae;
        // `Vary: Accept-Encoding` as any field: without the negotiation, which serves every
        // client from one object (tests/compression/).
        c.compression.enabled = false;
    })
    .await;
    let first = get_with(shellac.addr, "/", &[(field, stored)]).await;
    assert_eq!(first.text(), format!("{field}={stored}"));
    let second = get_with(shellac.addr, "/", &[(field, other)]).await;
    let shared = origin.count() == 1;
    if !shared {
        assert_eq!(
            second.text(),
            format!("{field}={other}"),
            "its own response"
        );
    }
    shellac.stop().await;
    shared
}

/// Issue 32: `Vary: Cookie` — a client whose session cookie differs only in letter case from
/// the one the page was stored for gets its own page, never the victim's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_values_compared_exactly_cookie() {
    assert!(!shares("cookie", "sid=VictimSecretAbc", "sid=victimsecretabc", true).await);
    assert!(!shares("cookie", "a=1;b=2", "a=1; b=2", true).await);
    assert!(shares("cookie", "sid=VictimSecretAbc", "sid=VictimSecretAbc", true).await);
}

/// Issue 32: `Vary: Authorization` with bearer tokens (a response the origin marked `public`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_values_compared_exactly_authorization_bearer() {
    assert!(
        !shares(
            "authorization",
            "Bearer AbC.dEf.GhI",
            "Bearer abc.def.ghi",
            true
        )
        .await
    );
    assert!(
        shares(
            "authorization",
            "Bearer AbC.dEf.GhI",
            "Bearer AbC.dEf.GhI",
            true
        )
        .await
    );
}

/// Issue 32: an application's own field (`X-Device`) and `Origin`: exact, whitespace too (its
/// syntax is not known to allow it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_values_compared_exactly_other_fields() {
    assert!(!shares("x-device", "Mobile", "mobile", true).await);
    assert!(!shares("x-device", "a, b", "a,b", true).await);
    assert!(!shares("origin", "https://A.example", "https://a.example", true).await);
    // A list field with case-sensitive members: list whitespace only.
    assert!(
        shares(
            "accept",
            "text/html,application/json",
            "text/html, application/json",
            true
        )
        .await
    );
    assert!(!shares("accept", "text/html;v=\"A\"", "text/html;v=\"a\"", true).await);
}

/// Issue 32: `Accept-Language` is case-insensitive by its specification (RFC 4647) and a list:
/// normalised on purpose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_values_compared_exactly_accept_language() {
    assert!(shares("accept-language", "en-US,fr;q=0.5", "en-us, fr;q=0.5", true).await);
    assert!(!shares("accept-language", "en-US", "fr", true).await);
}

/// Issue 32: `Accept-Encoding` tokens are case-insensitive: one variant for `GZIP, br` and
/// `gzip,br` even without the compression negotiation's rewriting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_values_compared_exactly_accept_encoding() {
    assert!(shares("accept-encoding", "GZIP, br", "gzip,br", false).await);
    assert!(!shares("accept-encoding", "gzip", "br", false).await);
}
