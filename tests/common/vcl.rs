//! Starting the real proxy on a VCL file written for one test.

use std::net::SocketAddr;
use std::sync::Arc;

use shellac::config::Config;

use super::Shellac;

/// Starts Shellac running `vcl` (with `${origin}` replaced by the origin's `host` and
/// `port` fields), written to a file in a temporary directory.
pub async fn start_vcl(name: &str, vcl: &str, origins: &[SocketAddr]) -> Shellac {
    start_vcl_with(name, vcl, origins, |_| {}).await
}

/// `vcl` with each `${originN}` replaced by the `.host` and `.port` fields of `origins[N]`.
pub fn with_origins(vcl: &str, origins: &[SocketAddr]) -> String {
    let mut text = vcl.to_string();
    for (i, o) in origins.iter().enumerate() {
        text = text.replace(
            &format!("${{origin{i}}}"),
            &format!(".host = \"{}\"; .port = \"{}\";", o.ip(), o.port()),
        );
    }
    text
}

/// [`start_vcl`] with `tweak` applied to the configuration first.
#[allow(dead_code)]
pub async fn start_vcl_with(
    name: &str,
    vcl: &str,
    origins: &[SocketAddr],
    tweak: impl FnOnce(&mut Config),
) -> Shellac {
    let dir = super::temp_dir(&format!("vcl-{name}"));
    let path = dir.join("site.vcl");
    std::fs::write(&path, with_origins(vcl, origins)).unwrap();
    let mut config = Config::embedded_default();
    config.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
    config.server.admin = Some("127.0.0.1:0".parse().unwrap());
    tweak(&mut config);
    if let Err(errors) = shellac::vcl::attach::attach_file(&mut config, &path) {
        panic!("{errors:?}");
    }
    assert!(config.validate().is_empty(), "{:?}", config.validate());
    let running = shellac::server::start(Arc::new(config))
        .await
        .expect("starts");
    Shellac::from_running(running)
}
