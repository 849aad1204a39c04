//! A `/log/stream` reader on the admin listener, for tests of live transactions.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Opens `/log/stream?query` and returns a line reader positioned after the greeting.
pub async fn stream(admin: SocketAddr, query: &str) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(admin).await.unwrap();
    s.write_all(format!("GET /log/stream?{query} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.unwrap();
        if line.trim().is_empty() {
            break;
        }
    }
    line.clear();
    r.read_line(&mut line).await.unwrap();
    assert_eq!(line.trim(), r#"{"streaming":true}"#);
    r
}

/// The next transaction (at most 10 s away).
pub async fn next_json(r: &mut BufReader<TcpStream>) -> serde_json::Value {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(10), r.read_line(&mut line))
        .await
        .expect("a transaction within 10 s")
        .unwrap();
    serde_json::from_str(&line).unwrap()
}
