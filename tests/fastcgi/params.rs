//! The operator's own FastCGI parameters (`[[backend]] params`, nginx's `fastcgi_param`):
//! sent with every request after the standard ones, which they override.

use super::common::*;
use super::{fpm, json, shellac_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_params_are_sent_and_override_the_standard_ones() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac_with(fpm, false, |c| {
        let params = &mut c.backends[0].params;
        params.insert("APP_ENV".into(), "production".into());
        params.insert("SERVER_NAME".into(), "www.example.org".into());
    })
    .await;
    let r = get(sh.addr, "/server.php").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = json(&r);
    assert_eq!(v["APP_ENV"], "production", "{v}");
    assert_eq!(v["SERVER_NAME"], "www.example.org", "{v}");
    assert_eq!(
        v["HTTP_HOST"], "test.example",
        "the request's own fields stay: {v}"
    );
}
