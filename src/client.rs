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
                "the admin listener wants a token: --token TOKEN or $SHELLAC_ADMIN_TOKEN",
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
