//! What the client session and the request path hand each other with a request or a response
//! (as `http` extensions): VCL's `sess.timeout_idle` ([`SessionIdle`]), the local address
//! ([`LocalAddr`]) and the listener ([`Listener`]) a request came in on.

/// VCL's `sess.timeout_idle`, as a request and response extension between the client
/// session (`server.rs`, `server/h2`) and the VCL program: on a request, the idle timeout an
/// earlier response set for the session; on a response, the idle timeout the session keeps
/// from then on (`None`: back to `server.idle_timeout`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionIdle(pub Option<std::time::Duration>);

/// VCL's `server.ip` and `local.ip`: the local address (IP and port) of the socket the
/// client connection was accepted on, as a request extension from the client session
/// (`server/local.rs`). Attached only when the loaded VCL program reads it
/// ([`Proxy::reads_local`]); a request without it reads `0.0.0.0:0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalAddr(pub std::net::SocketAddr);

/// The client listener a request came in on, as configured (`server.listen` or a `[[tls]]`'s
/// `listen` address as written), as a request extension from the client session: attached
/// only when the configuration has `[[site]]`s ([`Proxy::has_sites`]), which are chosen by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listener(pub std::net::SocketAddr);
