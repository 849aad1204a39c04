//! h2spec's cases (summerwind/h2spec: the 146 of "generic", "http2" and "hpack", plus its
//! strict and newer ones), written again in Rust against the real proxy: each case sends the
//! frames h2spec sends on a fresh connection and accepts what h2spec accepts — often
//! stricter: where h2spec takes any closed connection, a GOAWAY must carry the RFC's code
//! and be followed by the close, and where Shellac answers a stream error the case says so.
//! The table from case id to function is in docs/conformance.md ("HTTP/2: h2spec"); a
//! function is named after its case: `http2_6_5_3_1` is h2spec's "http2/6.5.3/1".
//!
//! One Shellac and one origin per test function; the cases of a group run one after the
//! other and every failure is reported at the end, by case id.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::h2::*;
use crate::common::*;

/// Declares a module's case table: `"id" => function`.
macro_rules! cases {
    ($($id:literal => $f:ident),* $(,)?) => {
        pub fn cases() -> Vec<crate::h2spec::Case> {
            vec![$(crate::h2spec::Case { id: $id, name: stringify!($f), run: |t| Box::pin($f(t)) }),*]
        }
    };
}

mod generic;
mod hpack;
mod http2_3_to_5;
mod http2_6;
mod http2_7_8;

pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const STREAM_CLOSED: u32 = 0x5;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;

/// SETTINGS parameters (RFC 9113 §6.5.2).
pub const HEADER_TABLE_SIZE: u16 = 0x1;
pub const ENABLE_PUSH: u16 = 0x2;
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const MAX_FRAME_SIZE: u16 = 0x5;
pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Every wait is bounded by this; a case that passes never waits for it.
pub const WAIT: Duration = Duration::from_secs(5);

/// h2spec's `MaxHeaderLen` (the value of each of its dummy header fields).
pub const DUMMY_LEN: usize = 4000;

pub type Outcome = Result<(), String>;

/// One h2spec case.
pub struct Case {
    pub id: &'static str,
    /// The function's name, as docs/conformance.md's table gives it.
    pub name: &'static str,
    pub run: fn(Target) -> Pin<Box<dyn Future<Output = Outcome> + Send>>,
}

/// Where a case connects: the cleartext listener (h2c with prior knowledge) or a TLS one
/// (ALPN `h2`).
#[derive(Clone)]
pub struct Target {
    addr: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Target {
    /// A connection with nothing sent yet.
    pub async fn connect(&self) -> Raw {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        // A case writes several small pieces (h2spec's frame by frame): without this, Nagle
        // holds each until the last is acknowledged, a delayed ACK's 40 ms per case.
        tcp.set_nodelay(true).unwrap();
        let Some(config) = &self.tls else {
            return Raw::from_stream(tcp);
        };
        let name = rustls::pki_types::ServerName::try_from("site.test").unwrap();
        let conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
        let mut tls = shellac::tls::stream::TlsStream::from_parts(tcp, conn);
        tls.handshake().await.expect("TLS handshake");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        Raw::from_stream(tls)
    }

    /// h2spec's handshake: the preface and an empty SETTINGS, the server's SETTINGS
    /// acknowledged, ours acknowledged.
    pub async fn handshake(&self) -> Raw {
        self.handshake_settings().await.0
    }

    /// [`Target::handshake`], with the parameters of the server's SETTINGS.
    pub async fn handshake_settings(&self) -> (Raw, Vec<(u16, u32)>) {
        let mut raw = self.connect().await;
        raw.send(&[PREFACE, &frame(SETTINGS, 0, 0, &[])].concat())
            .await;
        let mut params = None;
        let mut acked = false;
        while params.is_none() || !acked {
            match raw.event(WAIT).await {
                Event::Frame(f) if f.kind == SETTINGS && f.flags & ACK == 0 => {
                    raw.send(&frame(SETTINGS, ACK, 0, &[])).await;
                    params = Some(
                        f.payload
                            .chunks(6)
                            .map(|p| {
                                (
                                    u16::from_be_bytes([p[0], p[1]]),
                                    u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
                                )
                            })
                            .collect(),
                    );
                }
                Event::Frame(f) if f.kind == SETTINGS => acked = true,
                Event::Frame(_) => {}
                e => panic!("handshake: {e:?}"),
            }
        }
        (raw, params.unwrap_or_default())
    }
}

/// Runs `cases` one after the other; panics listing every case that failed.
async fn run(target: Target, cases: Vec<Case>) {
    let mut failed = Vec::new();
    let n = cases.len();
    for case in cases {
        if let Err(e) = (case.run)(target.clone()).await {
            failed.push(format!("{}: {e}", case.id));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {n} h2spec cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

async fn origin() -> Origin {
    // A body of a few bytes for every request (the flow-control cases need at least 5).
    Origin::start(|s| {
        Reply::ok(&format!("{} {} {}", s.method, s.path, s.body_len)).cc("max-age=60")
    })
    .await
}

async fn cleartext(origin: &Origin) -> (Shellac, Target) {
    let shellac = Shellac::start(origin.addr, |c| {
        c.http2.h2c = shellac::config::http2::H2c::All
    })
    .await;
    let target = Target {
        addr: shellac.addr,
        tls: None,
    };
    (shellac, target)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic() {
    let origin = origin().await;
    let (shellac, target) = cleartext(&origin).await;
    run(target, generic::cases()).await;
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_starting_frames_and_streams() {
    let origin = origin().await;
    let (shellac, target) = cleartext(&origin).await;
    run(target, http2_3_to_5::cases()).await;
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_frame_definitions() {
    let origin = origin().await;
    let (shellac, target) = cleartext(&origin).await;
    run(target, http2_6::cases()).await;
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_error_codes_and_messages() {
    let origin = origin().await;
    let (shellac, target) = cleartext(&origin).await;
    run(target, http2_7_8::cases()).await;
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpack() {
    let origin = origin().await;
    let (shellac, target) = cleartext(&origin).await;
    run(target, hpack::cases()).await;
    shellac.stop().await;
}

/// The same cases over TLS (ALPN `h2`): the session code behind the TLS listener is the one
/// behind h2c, and answers alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls() {
    let pki = common::tls::Pki::new("h2spec");
    let cert = pki.leaf("site", &["site.test"]);
    let origin = origin().await;
    let text = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        common::tls::tls_table(&[&cert], "")
    );
    let tls = shellac::config::Config::parse(&text, "t.toml")
        .unwrap_or_else(|e| panic!("{e:?}"))
        .tls;
    let shellac = Shellac::start(origin.addr, |c| c.tls = tls).await;
    let mut client = pki.client_config(&common::tls::all_versions());
    client.alpn_protocols = vec![b"h2".to_vec()];
    let target = Target {
        addr: shellac.tls_addrs()[0],
        tls: Some(Arc::new(client)),
    };
    run(target, all_cases()).await;
    assert!(shellac.stats().await["h2_conn"] >= 149);
    shellac.stop().await;
}

fn all_cases() -> Vec<Case> {
    let mut cases = generic::cases();
    cases.extend(http2_3_to_5::cases());
    cases.extend(http2_6::cases());
    cases.extend(http2_7_8::cases());
    cases.extend(hpack::cases());
    cases
}

/// h2spec's cases beyond the 146 of its 2.6 release (two strict ones, one added since).
const BEYOND_2_6: &[&str] = &["http2/5.1.1/3", "http2/5.4.1/2", "http2/6.3/3"];

/// docs/conformance.md's h2spec table names every case, with its function, and nothing else.
#[test]
fn the_docs_table_names_every_case() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/conformance.md");
    let text = std::fs::read_to_string(path).unwrap();
    let mut rows = std::collections::BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        if cells.len() == 4 && cells[0].starts_with("| `") {
            let id = cells[0].trim_start_matches("| ").trim_matches('`');
            let name = cells[3].trim_end_matches(" |").trim_matches('`');
            if rows.insert(id.to_string(), name.to_string()).is_some() {
                panic!("{id} twice in the table");
            }
        }
    }
    let cases = all_cases();
    for case in &cases {
        assert_eq!(
            rows.remove(case.id).as_deref(),
            Some(case.name),
            "docs/conformance.md: the row of {}",
            case.id
        );
    }
    assert!(rows.is_empty(), "rows without a case: {rows:?}");
    let of_2_6 = cases.iter().filter(|c| !BEYOND_2_6.contains(&c.id)).count();
    assert_eq!(of_2_6, 146, "h2spec 2.6 has 146 cases");
    let count = |p: &str| cases.iter().filter(|c| c.id.starts_with(p)).count();
    assert_eq!(
        (count("generic/"), count("http2/"), count("hpack/")),
        (44, 97, 8)
    );
}

// ---- what a case waits for -------------------------------------------------------------

/// Acknowledges a SETTINGS frame on the way (as h2spec's reader does); true if it was one.
async fn ack_settings(raw: &mut Raw, f: &RawFrame) -> bool {
    if f.kind == SETTINGS && f.flags & ACK == 0 {
        raw.send(&frame(SETTINGS, ACK, 0, &[])).await;
        return true;
    }
    false
}

fn name(kind: u8) -> &'static str {
    match kind {
        DATA => "DATA",
        HEADERS => "HEADERS",
        PRIORITY => "PRIORITY",
        RST_STREAM => "RST_STREAM",
        SETTINGS => "SETTINGS",
        PUSH_PROMISE => "PUSH_PROMISE",
        PING => "PING",
        GOAWAY => "GOAWAY",
        WINDOW_UPDATE => "WINDOW_UPDATE",
        CONTINUATION => "CONTINUATION",
        _ => "unknown frame",
    }
}

pub fn show(f: &RawFrame) -> String {
    match f.code() {
        Some(code) => format!("{} on stream {} code {code:#x}", name(f.kind), f.stream),
        None => format!(
            "{} on stream {} flags {:#x}",
            name(f.kind),
            f.stream,
            f.flags
        ),
    }
}

/// The connection closes (frames before the close are ignored, as h2spec ignores them).
pub async fn closed(raw: &mut Raw) -> Outcome {
    loop {
        match raw.event(WAIT).await {
            Event::Closed => return Ok(()),
            Event::Timeout => return Err("the connection was not closed".into()),
            Event::Frame(f) => {
                ack_settings(raw, &f).await;
            }
        }
    }
}

/// A connection error: GOAWAY with one of `codes`, then the close (RFC 9113 §5.4.1); or the
/// close alone (h2spec accepts it).
pub async fn connection_error(raw: &mut Raw, codes: &[u32]) -> Outcome {
    loop {
        match raw.event(WAIT).await {
            Event::Closed => return Ok(()),
            Event::Timeout => return Err("no GOAWAY and the connection stayed open".into()),
            Event::Frame(f) if f.kind == GOAWAY => {
                let code = f.code().unwrap_or(u32::MAX);
                if !codes.contains(&code) {
                    return Err(format!("GOAWAY {code:#x}, expected one of {codes:x?}"));
                }
                return closed(raw).await.map_err(|e| format!("after GOAWAY: {e}"));
            }
            Event::Frame(f) => {
                ack_settings(raw, &f).await;
            }
        }
    }
}

/// How a stream error was answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Answered {
    Reset(u32),
    GoAway,
    Closed,
}

/// A stream error as h2spec takes it: `RST_STREAM` or `GOAWAY` with one of `codes`, or the
/// connection closed.
pub async fn stream_error(raw: &mut Raw, codes: &[u32]) -> Result<Answered, String> {
    loop {
        match raw.event(WAIT).await {
            Event::Closed => return Ok(Answered::Closed),
            Event::Timeout => return Err("no stream error and the connection stayed open".into()),
            Event::Frame(f) if matches!(f.kind, RST_STREAM | GOAWAY) => {
                let code = f.code().unwrap_or(u32::MAX);
                if !codes.contains(&code) {
                    return Err(format!("{}, expected code one of {codes:x?}", show(&f)));
                }
                if f.kind == GOAWAY {
                    closed(raw)
                        .await
                        .map_err(|e| format!("after GOAWAY: {e}"))?;
                    return Ok(Answered::GoAway);
                }
                return Ok(Answered::Reset(f.stream));
            }
            Event::Frame(f) => {
                ack_settings(raw, &f).await;
            }
        }
    }
}

/// A stream error answered as one: `RST_STREAM` on `stream` with `code`, and the connection
/// still answers a PING afterwards.
pub async fn reset(raw: &mut Raw, stream: u32, code: u32) -> Outcome {
    match stream_error(raw, &[code]).await? {
        Answered::Reset(s) if s == stream => {}
        other => return Err(format!("{other:?}, expected RST_STREAM on stream {stream}")),
    }
    raw.send(&frame(PING, 0, 0, b"goes on!")).await;
    ping_ack(raw, b"goes on!")
        .await
        .map_err(|e| format!("after the stream error: {e}"))
}

/// The next frame of `kind` (h2spec's `WaitEventByType`); a GOAWAY or the close first fails.
pub async fn frame_of(raw: &mut Raw, kind: u8) -> Result<RawFrame, String> {
    loop {
        match raw.event(WAIT).await {
            Event::Closed => return Err(format!("closed, expected {}", name(kind))),
            Event::Timeout => return Err(format!("no {}", name(kind))),
            Event::Frame(f) if f.kind == kind => return Ok(f),
            Event::Frame(f) if f.kind == GOAWAY => {
                return Err(format!("{}, expected {}", show(&f), name(kind)));
            }
            Event::Frame(f) => {
                ack_settings(raw, &f).await;
            }
        }
    }
}

/// A response's HEADERS on `stream` (h2spec's `VerifyHeadersFrame`).
pub async fn headers_on(raw: &mut Raw, stream: u32) -> Outcome {
    loop {
        let f = frame_any(raw).await?;
        if f.kind == HEADERS && f.stream == stream {
            return Ok(());
        }
        if f.kind == RST_STREAM && f.stream == stream {
            return Err(format!("{}, expected HEADERS", show(&f)));
        }
    }
}

/// The next frame other than a SETTINGS (acknowledged); a GOAWAY or the close fails.
async fn frame_any(raw: &mut Raw) -> Result<RawFrame, String> {
    loop {
        match raw.event(WAIT).await {
            Event::Closed => return Err("closed".into()),
            Event::Timeout => return Err("nothing came".into()),
            Event::Frame(f) if f.kind == GOAWAY => return Err(show(&f)),
            Event::Frame(f) => {
                if !ack_settings(raw, &f).await {
                    return Ok(f);
                }
            }
        }
    }
}

/// A PING acknowledging `data` (another PING frame first fails).
pub async fn ping_ack(raw: &mut Raw, data: &[u8; 8]) -> Outcome {
    let f = frame_of(raw, PING).await?;
    if f.flags & ACK == 0 || f.payload != data {
        return Err(format!("PING flags {:#x} payload {:?}", f.flags, f.payload));
    }
    Ok(())
}

/// The stream's response is complete (a HEADERS or DATA with END_STREAM).
pub async fn stream_end(raw: &mut Raw, stream: u32) -> Outcome {
    loop {
        let f = frame_any(raw).await?;
        if f.stream == stream && matches!(f.kind, HEADERS | DATA) && f.flags & END_STREAM != 0 {
            return Ok(());
        }
        if f.stream == stream && f.kind == RST_STREAM {
            return Err(show(&f));
        }
    }
}

/// The next DATA frame must have exactly `len` bytes of payload.
pub async fn data_of_len(raw: &mut Raw, len: usize) -> Outcome {
    let f = frame_of(raw, DATA).await?;
    if f.payload.len() != len {
        return Err(format!("DATA of {} bytes, expected {len}", f.payload.len()));
    }
    Ok(())
}

// ---- what a case sends ------------------------------------------------------------------

/// h2spec's common request fields, `:method` `method`, `:path` `/`.
pub fn block(method: &str) -> Vec<u8> {
    request_block(method, "/", &[])
}

/// HPACK: fields as literals without indexing.
pub fn fields(list: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in list {
        literal(&mut b, n.as_bytes(), v.as_bytes());
    }
    b
}

/// h2spec's dummy header fields: `x-dummyN` with `DUMMY_LEN` bytes of `x`.
pub fn dummy(n: usize) -> Vec<u8> {
    let value = "x".repeat(DUMMY_LEN);
    let names: Vec<String> = (0..n).map(|i| format!("x-dummy{i}")).collect();
    let list: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), value.as_str())).collect();
    fields(&list)
}

pub fn headers(stream: u32, flags: u8, block: &[u8]) -> Vec<u8> {
    frame(HEADERS, flags, stream, block)
}

/// A GET of `/` on `stream`, END_STREAM and END_HEADERS.
pub fn get(stream: u32) -> Vec<u8> {
    headers(stream, END_STREAM | END_HEADERS, &block("GET"))
}

/// A POST of `/` on `stream` whose body follows.
pub fn post(stream: u32) -> Vec<u8> {
    headers(stream, END_HEADERS, &block("POST"))
}

pub fn data(stream: u32, end: bool, payload: &[u8]) -> Vec<u8> {
    frame(DATA, if end { END_STREAM } else { 0 }, stream, payload)
}

pub fn continuation(stream: u32, end: bool, block: &[u8]) -> Vec<u8> {
    frame(
        CONTINUATION,
        if end { END_HEADERS } else { 0 },
        stream,
        block,
    )
}

/// The 5 bytes of priority fields: dependency, exclusive bit, weight byte.
pub fn priority_fields(dependency: u32, exclusive: bool, weight: u8) -> Vec<u8> {
    let mut p = (dependency & 0x7fff_ffff | if exclusive { 1 << 31 } else { 0 })
        .to_be_bytes()
        .to_vec();
    p.push(weight);
    p
}

pub fn priority(stream: u32, dependency: u32, exclusive: bool, weight: u8) -> Vec<u8> {
    frame(
        PRIORITY,
        0,
        stream,
        &priority_fields(dependency, exclusive, weight),
    )
}

pub fn rst(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

pub fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (id, value) in params {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&value.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

pub fn ping(data: &[u8; 8]) -> Vec<u8> {
    frame(PING, 0, 0, data)
}

pub fn goaway(last: u32, code: u32, debug: &[u8]) -> Vec<u8> {
    let mut p = last.to_be_bytes().to_vec();
    p.extend_from_slice(&code.to_be_bytes());
    p.extend_from_slice(debug);
    frame(GOAWAY, 0, 0, &p)
}

/// h2spec's PING payload.
pub const H2SPEC: &[u8; 8] = b"h2spec\0\0";
