//! HTTP building blocks below the proxy: the strict HTTP/1 request scanner (`strict`),
//! target normalisation (`target`), `Accept-Encoding` negotiation (`accept_encoding`),
//! conditional and Range requests against validators (`conditional`),
//! Cache-Control, structured fields (RFC 8941) and date parsing, how `Vary` compares field
//! values (`selecting`), header hygiene (hop-by-hop, forwarding fields), cheap field lookups
//! (`fields`), and the field edits a changed body makes (`transform`).

pub mod accept_encoding;
pub mod base64;
pub mod cache_control;
pub mod conditional;
pub mod date;
pub mod fields;
pub mod headers;
pub mod selecting;
pub mod server_name;
pub mod strict;
pub mod structured;
pub mod surrogate_control;
pub mod target;
pub mod transform;
