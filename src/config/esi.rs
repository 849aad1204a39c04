//! `[esi]`: how Edge Side Includes are parsed and assembled once a policy turns them on for a
//! response (VCL `beresp.do_esi`, a rule's `esi = true`; docs/esi.md).

use serde::{Deserialize, Serialize};

use super::units::Dur;

/// `[esi]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EsiConfig {
    /// Parse bodies that do not start with `<` too (Varnish's feature
    /// `esi_disable_xml_check`). Default false.
    pub disable_xml_check: bool,
    /// Skip a UTF-8 byte-order mark before the check for `<` (Varnish's `esi_remove_bom`).
    /// Default false.
    pub remove_bom: bool,
    /// After a `<` that starts no ESI tag, look for the next `<` at once instead of skipping
    /// to that element's `>` (Varnish's feature `esi_ignore_other_elements`). Default false.
    pub ignore_other_elements: bool,
    /// Include levels below a page (Varnish's `max_esi_depth`). Default 5.
    pub max_depth: u8,
    /// Includes one client page may fetch in all, every level counted. Default 256.
    pub max_includes: u32,
    /// Includes of one page fetched at once. Default 16.
    pub concurrency: u32,
    /// Host names an absolute `src` may name besides the backends' and the page's own.
    pub hosts: Vec<String>,
    /// What a fragment failing after the page's first byte does: `"drop"` (left out) or
    /// `"abort"` (the client's response is cut). Default "drop".
    pub late_failure: LateFailure,
    /// How long one include may take, its whole response, before it counts as failed.
    /// Default 30s.
    pub include_timeout: Dur,
    /// Backend requests carry `Surrogate-Capability: shellac="ESI/1.0"` and a response's
    /// `Surrogate-Control` for Shellac is read: `content="ESI/1.0"` turns ESI on.
    /// Default false.
    pub surrogate_control: bool,
}

impl Default for EsiConfig {
    fn default() -> Self {
        EsiConfig {
            disable_xml_check: false,
            remove_bom: false,
            ignore_other_elements: false,
            max_depth: 5,
            max_includes: 256,
            concurrency: 16,
            hosts: Vec::new(),
            late_failure: LateFailure::Drop,
            include_timeout: Dur(std::time::Duration::from_secs(30)),
            surrogate_control: false,
        }
    }
}

/// What a fragment that fails once the page's first bytes went out does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LateFailure {
    /// Left out: the page goes on without it (a status cannot change any more).
    Drop,
    /// The client's response is cut, so the client sees the page is incomplete.
    Abort,
}
