//! `[[director]]` and `[routing]`: how requests are spread over the origins.

use serde::{Deserialize, Serialize};

/// How a director picks a backend.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DirectorKind {
    /// Each healthy member in turn.
    RoundRobin,
    /// A healthy member at random, in proportion to `weight`.
    Random,
    /// The first healthy member, in order.
    Fallback,
    /// Consistent (rendezvous) hashing: the same key goes to the same healthy member; when a
    /// member leaves or returns only its share of keys moves.
    Hash,
}

impl DirectorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DirectorKind::RoundRobin => "round_robin",
            DirectorKind::Random => "random",
            DirectorKind::Fallback => "fallback",
            DirectorKind::Hash => "hash",
        }
    }
}

/// What a `hash` director hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashOn {
    /// The cache key (host + path + query). The default.
    Key,
    /// A request header's value.
    Header(String),
    /// A cookie's value.
    Cookie(String),
    /// The client's IP address.
    ClientIp,
}

impl HashOn {
    /// Parses `key`, `client_ip`, `header:NAME`, `cookie:NAME`.
    pub fn parse(text: &str) -> Result<HashOn, String> {
        match text.split_once(':') {
            None if text == "key" => Ok(HashOn::Key),
            None if text == "client_ip" => Ok(HashOn::ClientIp),
            Some(("header", name)) if http::HeaderName::from_bytes(name.as_bytes()).is_ok() => {
                Ok(HashOn::Header(name.to_ascii_lowercase()))
            }
            Some(("cookie", name)) if !name.is_empty() => Ok(HashOn::Cookie(name.to_string())),
            _ => Err(format!(
                "`{text}` is not a hash source (use \"key\", \"client_ip\", \"header:NAME\" or \"cookie:NAME\")"
            )),
        }
    }
}

/// `[[director]]`: a named group of backends and/or other directors.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DirectorConfig {
    /// Name routes and other directors refer to. Required.
    pub name: String,
    /// `round_robin`, `random`, `fallback` or `hash`. Required.
    #[serde(rename = "type")]
    pub kind: DirectorKind,
    /// Member backends or directors, by name. Required, at least one.
    #[serde(deserialize_with = "crate::config::lists::one_or_many")]
    pub backends: Vec<String>,
    /// For `hash`: `key` (default), `client_ip`, `header:NAME` or `cookie:NAME`.
    #[serde(default)]
    pub hash_on: Option<String>,
    /// Statuses that make Shellac re-run the request on the director's next choice.
    #[serde(default, deserialize_with = "crate::config::lists::one_or_many")]
    pub restart_on: Vec<u16>,
    /// The opposite: restart on any status not listed (e.g. `[200, 302]`).
    #[serde(default, deserialize_with = "crate::config::lists::one_or_many")]
    pub restart_unless: Vec<u16>,
    /// Restarts per request at most; after the last one its response is delivered. Default 4.
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
    /// Each member's weight in this director, in `backends`' order, where a VCL program gave
    /// them (vmod_directors' `hash.add_backend(b, w)`): a hash director then spreads keys in
    /// proportion to them. Empty (always, from TOML): the backends' own `weight`.
    #[serde(skip)]
    pub member_weights: Vec<u32>,
}

fn default_max_restarts() -> u32 {
    4
}

impl DirectorConfig {
    /// Whether a response with `status` should be retried on the next choice.
    pub fn restarts_on(&self, status: u16) -> bool {
        if !self.restart_unless.is_empty() {
            return !self.restart_unless.contains(&status);
        }
        self.restart_on.contains(&status)
    }

    pub fn hash_on(&self) -> HashOn {
        self.hash_on
            .as_deref()
            .and_then(|h| HashOn::parse(h).ok())
            .unwrap_or(HashOn::Key)
    }

    /// `name (kind: member, member)`: the director as `shellac check` and the start-up
    /// summary name it.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}: {})",
            self.name,
            self.kind.as_str(),
            self.backends.join(", ")
        )
    }
}

/// `[routing]`: where requests go.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    /// Backend or director that receives requests. Default: the first `[[director]]`, else the
    /// first `[[backend]]`.
    #[serde(default)]
    pub default: Option<String>,
    /// nginx `rewrite` lines (`REGEX REPLACEMENT [FLAG]`, config/rewrite.rs), applied in order
    /// to every request's path before its cache key is made; a `[[site]]` with its own
    /// `rewrite` uses those instead.
    #[serde(default, deserialize_with = "crate::config::lists::one_or_many")]
    pub rewrite: Vec<String>,
}
