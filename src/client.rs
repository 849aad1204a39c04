//! A small blocking client for the admin listener, used by every CLI command that talks to a
//! running instance (`stats`, `stat`, `top`, `log`, `inspect`, `reload`, `ban`, `purge`). It
//! speaks HTTP/1.0 so every body, streamed or not, is delimited by the connection closing (no
//! chunked decoding needed), and sends the admin token when one is given.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Where the admin listener is and the bearer token to send, if any.
#[derive(Clone, Debug)]
pub struct AdminClient {
    pub addr: SocketAddr,
    pub token: Option<String>,
}

/// An admin response read whole.
#[derive(Debug)]
pub struct AdminResponse {
    pub status: u16,
    pub body: String,
}

impl AdminClient {
    fn connect(&self, method: &str, path: &str, body: &[u8]) -> io::Result<BufReader<TcpStream>> {
        let mut stream =
            TcpStream::connect_timeout(&self.addr, Duration::from_secs(3)).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot reach the admin listener at {}: {e}", self.addr),
                )
            })?;
        let auth = self
            .token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.0\r\nHost: {}\r\n{auth}Content-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        )?;
        stream.write_all(body)?;
        Ok(BufReader::new(stream))
    }

    /// Sends a request and returns the status, leaving the reader at the start of the body.
    pub fn open(&self, method: &str, path: &str) -> io::Result<(u16, BufReader<TcpStream>)> {
        self.open_with_body(method, path, b"")
    }

    fn open_with_body(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> io::Result<(u16, BufReader<TcpStream>)> {
        let mut reader = self.connect(method, path, body)?;
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("not an HTTP response: {line:?}"),
                )
            })?;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
                break;
            }
        }
        Ok((status, reader))
    }

    /// A whole response (times out after 10 s of silence).
    pub fn request(&self, method: &str, path: &str) -> io::Result<AdminResponse> {
        self.request_with_body(method, path, b"")
    }

    /// A whole response to a request with a body.
    pub fn request_with_body(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> io::Result<AdminResponse> {
        let (status, mut reader) = self.open_with_body(method, path, body)?;
        reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut body = String::new();
        reader.read_to_string(&mut body)?;
        if status == 401 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the admin listener wants a token: --token TOKEN, $SHELLAC_ADMIN_TOKEN, or --config FILE (its server.admin_token)",
            ));
        }
        Ok(AdminResponse { status, body })
    }

    /// `GET path` as JSON; an error unless the status is 200.
    pub fn get_json(&self, path: &str) -> io::Result<serde_json::Value> {
        let resp = self.request("GET", path)?;
        if resp.status != 200 {
            return Err(io::Error::other(format!(
                "GET {path}: status {}: {}",
                resp.status,
                resp.body.trim()
            )));
        }
        serde_json::from_str(&resp.body)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("GET {path}: {e}")))
    }
}

/// The default admin address, as `server.admin` defaults.
pub const DEFAULT_ADMIN: &str = "127.0.0.1:6082";

/// Where a CLI command found the admin listener: `--admin`, else the `server.admin` (and
/// `server.admin_token`) of `--config FILE`, else `$SHELLAC_ADMIN`, else the default. A flag
/// beats the environment. Returns the client and the words for where its address came from,
/// for the error that says how to point the command elsewhere ([`unreachable_hint`]).
pub fn locate(
    flag: Option<SocketAddr>,
    config: Option<&std::path::Path>,
    env: Option<&str>,
    token: Option<String>,
) -> Result<(AdminClient, String), String> {
    if let Some(addr) = flag {
        return Ok((AdminClient { addr, token }, format!("--admin {addr}")));
    }
    if let Some(path) = config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--config {}: cannot read it: {e}", path.display()))?;
        let doc: toml::Table = toml::from_str(&text)
            .map_err(|e| format!("--config {}: not TOML: {}", path.display(), e.message()))?;
        let server = doc.get("server").and_then(toml::Value::as_table);
        let admin = server.and_then(|s| s.get("admin"));
        let token = token.or_else(|| {
            server
                .and_then(|s| s.get("admin_token"))
                .and_then(toml::Value::as_str)
                .map(str::to_string)
        });
        let file = path.display();
        let addr = match admin {
            None => DEFAULT_ADMIN.parse().map_err(|_| String::new())?,
            Some(toml::Value::String(s)) if s != "off" => s.parse().map_err(|_| {
                format!("--config {file}: server.admin = {s:?} is not an address (ADDR:PORT)")
            })?,
            Some(_) => {
                return Err(format!(
                    "--config {file}: server.admin is off, so the Shellac running with it has no admin listener to talk to"
                ));
            }
        };
        let from = match admin {
            None => format!("the default of --config {file} (no server.admin in it)"),
            Some(_) => format!("server.admin in {file}"),
        };
        return Ok((AdminClient { addr, token }, from));
    }
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        let addr = v
            .parse()
            .map_err(|_| format!("SHELLAC_ADMIN={v:?} is not an address (ADDR:PORT)"))?;
        return Ok((AdminClient { addr, token }, format!("$SHELLAC_ADMIN={v}")));
    }
    let addr = DEFAULT_ADMIN.parse().map_err(|_| String::new())?;
    Ok((
        AdminClient { addr, token },
        "the default (no --admin, --config or $SHELLAC_ADMIN given)".into(),
    ))
}

/// What to say when the admin listener found from `from` (see [`locate`]) cannot be reached.
pub fn unreachable_hint(from: &str) -> String {
    format!(
        "the address is {from}. Is Shellac running, with its admin listener there? Point this command at it with --admin ADDR:PORT, --config FILE (the file it runs with: its server.admin and admin_token are used) or SHELLAC_ADMIN=ADDR:PORT"
    )
}

/// Whether `e` is a failure to reach the admin listener at all (not an answer from it).
pub fn is_unreachable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::TimedOut
            | io::ErrorKind::AddrNotAvailable
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
            | io::ErrorKind::ConnectionReset
    )
}
