//! `[[probe]]` and a backend's `probe` (by name or inline): how an origin's health is checked.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::units::Dur;

/// A backend's probe: by name or inline.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ProbeRef {
    Named(String),
    Inline(ProbeConfig),
}

/// By hand rather than `untagged`, so a mistake inside an inline probe is reported as itself
/// (`window`: expected a whole number), not as "data did not match any variant".
impl<'de> Deserialize<'de> for ProbeRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ProbeRef;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the name of a [[probe]], or an inline probe table")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ProbeRef, E> {
                Ok(ProbeRef::Named(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ProbeRef, A::Error> {
                ProbeConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ProbeRef::Inline)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `[[probe]]`: an active health check, run in the background (never on the request path).
/// A backend is healthy when at least `threshold` of the last `window` probes passed.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// Name backends refer to (`probe = "name"`). Required for `[[probe]]` tables.
    #[serde(default)]
    pub name: String,
    /// Path to GET, sent with the backend's `Host` and `Connection: close`. Default `/` when
    /// `request` is not given.
    #[serde(default)]
    pub url: Option<String>,
    /// A raw request, one line per element, sent verbatim (CRLF-joined, blank line appended).
    #[serde(default)]
    pub request: Option<Vec<String>>,
    /// Status a passing probe answers with. Default 200.
    #[serde(default = "default_expected_status")]
    pub expected_status: u16,
    /// Time between probes. Default `5s`.
    #[serde(default = "default_interval")]
    pub interval: Dur,
    /// Time a probe may take (connect, send, status line). Default `2s`.
    #[serde(default = "default_probe_timeout")]
    pub timeout: Dur,
    /// How many recent probes are remembered (1–64). Default 8.
    #[serde(default = "default_window")]
    pub window: u32,
    /// How many of the last `window` probes must pass. Default 3.
    #[serde(default = "default_threshold")]
    pub threshold: u32,
    /// Probes counted as passed at start-up. Default `threshold - 1` (sick until one passes).
    #[serde(default)]
    pub initial: Option<u32>,
}

fn default_expected_status() -> u16 {
    200
}
fn default_interval() -> Dur {
    Dur(Duration::from_secs(5))
}
fn default_probe_timeout() -> Dur {
    Dur(Duration::from_secs(2))
}
fn default_window() -> u32 {
    8
}
fn default_threshold() -> u32 {
    3
}

impl ProbeConfig {
    /// Probes assumed passed at start.
    pub fn initial(&self) -> u32 {
        self.initial.unwrap_or(self.threshold.saturating_sub(1))
    }
}
