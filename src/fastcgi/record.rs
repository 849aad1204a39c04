//! FastCGI 1.0 records on the wire: the 8-byte header, the request records Shellac sends
//! (BEGIN_REQUEST, PARAMS, STDIN, ABORT_REQUEST) and an incremental reader for what an
//! application sends back (STDOUT, STDERR, END_REQUEST, and the management records a
//! responder may send unasked; STDOUT's content handed out as it arrives). Pure: no I/O,
//! every length checked.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The only protocol version there is.
pub const VERSION: u8 = 1;
/// The header in front of every record.
pub const HEADER_LEN: usize = 8;
/// The largest content one record carries.
pub const MAX_CONTENT: usize = 65_535;

/// Record types (FastCGI 1.0, section 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    BeginRequest = 1,
    AbortRequest = 2,
    EndRequest = 3,
    Params = 4,
    Stdin = 5,
    Stdout = 6,
    Stderr = 7,
    Data = 8,
    GetValues = 9,
    GetValuesResult = 10,
    UnknownType = 11,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::BeginRequest,
            2 => Kind::AbortRequest,
            3 => Kind::EndRequest,
            4 => Kind::Params,
            5 => Kind::Stdin,
            6 => Kind::Stdout,
            7 => Kind::Stderr,
            8 => Kind::Data,
            9 => Kind::GetValues,
            10 => Kind::GetValuesResult,
            11 => Kind::UnknownType,
            _ => return None,
        })
    }
}

/// BEGIN_REQUEST's role: Shellac is always a web server asking a responder.
const ROLE_RESPONDER: u16 = 1;
/// BEGIN_REQUEST's flag: keep the connection open after this request.
const FLAG_KEEP_CONN: u8 = 1;

/// END_REQUEST's protocol status (section 5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolStatus {
    /// The request was answered.
    RequestComplete,
    /// The application refused a second request on this connection.
    CantMultiplex,
    /// The application is out of a resource (e.g. PHP-FPM's listen queue).
    Overloaded,
    /// The application does not play the responder role.
    UnknownRole,
    /// A status FastCGI 1.0 does not define.
    Other(u8),
}

/// An application's END_REQUEST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndRequest {
    /// The application's exit status (CGI's).
    pub app_status: u32,
    /// Whether the request was answered.
    pub protocol_status: ProtocolStatus,
}

/// One record read from an application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Part of the CGI response (head, then body): a record's content, or the part of it that
    /// arrived; empty at the end of the stream.
    Stdout(Bytes),
    /// Part of the application's error output; empty at the end of the stream.
    Stderr(Bytes),
    /// The end of the request.
    End(EndRequest),
    /// A record for another request id, or a management record: read and dropped.
    Ignored,
}

/// What is wrong with an application's bytes. Every one ends the connection: after a bad
/// record the stream cannot be trusted to be in step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("FastCGI record with version {0} (only 1 exists)")]
    Version(u8),
    #[error("FastCGI record of unknown type {0}")]
    Type(u8),
    #[error("FastCGI {0:?} record from the application, which only a web server sends")]
    Unexpected(Kind),
    #[error("FastCGI END_REQUEST of {0} bytes (8 expected)")]
    EndLength(usize),
}

/// The header of a record.
fn put_header(out: &mut BytesMut, kind: Kind, id: u16, content: usize, padding: u8) {
    debug_assert!(content <= MAX_CONTENT);
    out.put_u8(VERSION);
    out.put_u8(kind as u8);
    out.put_u16(id);
    out.put_u16(content as u16);
    out.put_u8(padding);
    out.put_u8(0);
}

/// Padding that brings a record's content to a multiple of 8 bytes, as the specification
/// recommends and as PHP-FPM and nginx send.
fn padding_for(content: usize) -> u8 {
    ((8 - content % 8) % 8) as u8
}

/// Appends BEGIN_REQUEST for a responder; `keep_conn` asks the application to keep the
/// connection open for the next request (FCGI_KEEP_CONN).
pub fn begin_request(out: &mut BytesMut, id: u16, keep_conn: bool) {
    put_header(out, Kind::BeginRequest, id, 8, 0);
    out.put_u16(ROLE_RESPONDER);
    out.put_u8(if keep_conn { FLAG_KEEP_CONN } else { 0 });
    out.put_bytes(0, 5);
}

/// Appends ABORT_REQUEST (the client went away).
pub fn abort_request(out: &mut BytesMut, id: u16) {
    put_header(out, Kind::AbortRequest, id, 0, 0);
}

/// Appends `data` as records of `kind` (PARAMS or STDIN), split at [`MAX_CONTENT`]. Empty
/// `data` appends nothing: the stream's end is [`end_stream`].
pub fn stream(out: &mut BytesMut, kind: Kind, id: u16, data: &[u8]) {
    for piece in data.chunks(MAX_CONTENT) {
        let padding = padding_for(piece.len());
        put_header(out, kind, id, piece.len(), padding);
        out.put_slice(piece);
        out.put_bytes(0, usize::from(padding));
    }
}

/// Appends the empty record that ends a PARAMS or STDIN stream.
pub fn end_stream(out: &mut BytesMut, kind: Kind, id: u16) {
    put_header(out, kind, id, 0, 0);
}

/// Appends one name-value pair in FastCGI's encoding (section 3.4): each length in one byte
/// below 128, else in four with the top bit set. Lengths above 2^31 - 1 cannot be encoded;
/// such a pair is skipped and `false` returned.
pub fn put_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) -> bool {
    if name.len() > 0x7fff_ffff || value.len() > 0x7fff_ffff {
        return false;
    }
    for len in [name.len(), value.len()] {
        if len < 128 {
            out.push(len as u8);
        } else {
            out.extend_from_slice(&((len as u32) | 0x8000_0000).to_be_bytes());
        }
    }
    out.extend_from_slice(name);
    out.extend_from_slice(value);
    true
}

/// Reads an application's records for one request id from bytes as they arrive.
#[derive(Debug)]
pub struct Reader {
    id: u16,
    /// The STDOUT record being handed out as its content arrives: its content bytes and
    /// padding still to come.
    stdout: Option<(usize, usize)>,
}

impl Reader {
    /// A reader for the records of request `id`.
    pub fn new(id: u16) -> Reader {
        Reader { id, stdout: None }
    }

    /// The next record in `buf` (consumed from it), `Ok(None)` when `buf` holds only part of
    /// one. The content of a STDOUT record of this request is handed out as it arrives, in
    /// as many pieces as it came in (each `Record::Stdout`, never empty but for the stream's
    /// end), so `buf` never needs to hold a whole 64 KiB record of the response body; any
    /// other record is whole: at most 8 + 65,535 + 255 bytes.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Record>, ReadError> {
        if let Some((content, padding)) = self.stdout.as_mut() {
            if *content > 0 {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = (*content).min(buf.len());
                *content -= n;
                let piece = buf.split_to(n).freeze();
                if *content == 0 {
                    let skip = (*padding).min(buf.len());
                    buf.advance(skip);
                    *padding -= skip;
                    if *padding == 0 {
                        self.stdout = None;
                    }
                }
                return Ok(Some(Record::Stdout(piece)));
            }
            let skip = (*padding).min(buf.len());
            buf.advance(skip);
            *padding -= skip;
            if *padding > 0 {
                return Ok(None);
            }
            self.stdout = None;
        }
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let version = buf[0];
        if version != VERSION {
            return Err(ReadError::Version(version));
        }
        let kind = Kind::from_u8(buf[1]).ok_or(ReadError::Type(buf[1]))?;
        let id = u16::from_be_bytes([buf[2], buf[3]]);
        let content = usize::from(u16::from_be_bytes([buf[4], buf[5]]));
        let padding = usize::from(buf[6]);
        if kind == Kind::Stdout && id == self.id && content > 0 {
            buf.advance(HEADER_LEN);
            self.stdout = Some((content, padding));
            return self.next(buf);
        }
        if buf.len() < HEADER_LEN + content + padding {
            return Ok(None);
        }
        buf.advance(HEADER_LEN);
        let body = buf.split_to(content).freeze();
        buf.advance(padding);
        // Management records (id 0) and records of other requests are not ours.
        if id != self.id {
            return Ok(Some(Record::Ignored));
        }
        match kind {
            Kind::Stdout => Ok(Some(Record::Stdout(body))),
            Kind::Stderr => Ok(Some(Record::Stderr(body))),
            Kind::EndRequest => {
                if body.len() != 8 {
                    return Err(ReadError::EndLength(body.len()));
                }
                let app_status = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
                let protocol_status = match body[4] {
                    0 => ProtocolStatus::RequestComplete,
                    1 => ProtocolStatus::CantMultiplex,
                    2 => ProtocolStatus::Overloaded,
                    3 => ProtocolStatus::UnknownRole,
                    other => ProtocolStatus::Other(other),
                };
                Ok(Some(Record::End(EndRequest {
                    app_status,
                    protocol_status,
                })))
            }
            Kind::GetValuesResult | Kind::UnknownType => Ok(Some(Record::Ignored)),
            other => Err(ReadError::Unexpected(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_request_is_the_specifications_bytes() {
        let mut out = BytesMut::new();
        begin_request(&mut out, 1, true);
        assert_eq!(&out[..], &[1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn pairs_use_one_or_four_byte_lengths() {
        let mut out = Vec::new();
        assert!(put_pair(&mut out, b"SCRIPT_NAME", b"/index.php"));
        assert_eq!(&out[..2], &[11, 10]);
        let long = vec![b'x'; 200];
        let mut out = Vec::new();
        assert!(put_pair(&mut out, b"QUERY_STRING", &long));
        assert_eq!(&out[..5], &[12, 0x80, 0, 0, 200]);
        assert_eq!(out.len(), 5 + 12 + 200);
    }

    #[test]
    fn streams_are_split_padded_and_read_back() {
        let data = vec![7u8; MAX_CONTENT + 10];
        let mut out = BytesMut::new();
        stream(&mut out, Kind::Stdin, 3, &data);
        end_stream(&mut out, Kind::Stdin, 3);
        // Two records (the second padded to 16 bytes) and the end record.
        assert_eq!(out.len(), (8 + MAX_CONTENT + 1) + (8 + 16) + 8);
        assert_eq!(out[6], 1, "65,535 bytes padded by one");
    }

    fn app_record(kind: u8, id: u16, content: &[u8], padding: u8) -> Vec<u8> {
        let mut v = vec![1, kind];
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(&(content.len() as u16).to_be_bytes());
        v.push(padding);
        v.push(0);
        v.extend_from_slice(content);
        v.extend(std::iter::repeat_n(0, usize::from(padding)));
        v
    }

    #[test]
    fn an_answer_is_read_whatever_its_cuts() {
        let mut wire = app_record(6, 1, b"Status: 200 OK\r\n\r\nhello", 3);
        wire.extend(app_record(7, 1, b"PHP Notice: x", 0));
        wire.extend(app_record(6, 2, b"someone else's", 0));
        wire.extend(app_record(6, 1, b"", 0));
        wire.extend(app_record(3, 1, &[0, 0, 0, 0, 0, 0, 0, 0], 0));
        for cut in 1..wire.len() {
            let mut reader = Reader::new(1);
            let mut buf = BytesMut::new();
            let mut got: Vec<Record> = Vec::new();
            for piece in wire.chunks(cut) {
                buf.extend_from_slice(piece);
                while let Some(r) = reader.next(&mut buf).expect("valid records") {
                    // A STDOUT record's content comes in pieces as it arrives: joined here.
                    match (got.last_mut(), r) {
                        (Some(Record::Stdout(before)), Record::Stdout(more))
                            if !before.is_empty() && !more.is_empty() =>
                        {
                            *before = [&before[..], &more[..]].concat().into();
                        }
                        (_, r) => got.push(r),
                    }
                }
            }
            assert_eq!(
                got,
                vec![
                    Record::Stdout(Bytes::from_static(b"Status: 200 OK\r\n\r\nhello")),
                    Record::Stderr(Bytes::from_static(b"PHP Notice: x")),
                    Record::Ignored,
                    Record::Stdout(Bytes::new()),
                    Record::End(EndRequest {
                        app_status: 0,
                        protocol_status: ProtocolStatus::RequestComplete
                    }),
                ],
                "pieces of {cut}"
            );
            assert!(buf.is_empty());
        }
    }

    /// Regression (bench/ab2009.sh phpinfo): PHP-FPM writes a page's body as 64 KiB records;
    /// waiting for a whole one grew the read buffer past glibc's mmap threshold (fixed at
    /// 64 KiB, `server::trim`), a mapping made, faulted in and unmapped on every request. A
    /// STDOUT record's content is handed out as it arrives, so the buffer holds one read.
    #[test]
    fn a_big_stdout_record_is_handed_out_as_it_arrives() {
        let content: Vec<u8> = (0..MAX_CONTENT).map(|i| (i % 251) as u8).collect();
        let mut wire = app_record(6, 1, &content, 1);
        wire.extend(app_record(6, 1, b"", 0));
        wire.extend(app_record(3, 1, &[0; 8], 0));
        let mut reader = Reader::new(1);
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut pieces = 0;
        let mut ended = false;
        for read in wire.chunks(16 * 1024) {
            buf.extend_from_slice(read);
            while let Some(r) = reader.next(&mut buf).expect("valid records") {
                match r {
                    Record::Stdout(b) if !b.is_empty() => {
                        assert!(!ended);
                        assert!(b.len() <= 16 * 1024);
                        body.extend_from_slice(&b);
                        pieces += 1;
                    }
                    Record::Stdout(_) => ended = true,
                    Record::End(end) => {
                        assert!(ended);
                        assert_eq!(end.protocol_status, ProtocolStatus::RequestComplete);
                    }
                    other => panic!("{other:?}"),
                }
            }
            assert!(buf.len() < HEADER_LEN, "{} bytes held", buf.len());
        }
        assert_eq!(body, content);
        assert_eq!(pieces, 5, "one piece a read");
        assert!(buf.is_empty());
    }

    #[test]
    fn broken_records_are_errors() {
        let mut reader = Reader::new(1);
        let mut buf = BytesMut::from(&app_record(6, 1, b"x", 0)[..]);
        buf[0] = 2;
        assert_eq!(reader.next(&mut buf), Err(ReadError::Version(2)));
        let mut buf = BytesMut::from(&app_record(42, 1, b"x", 0)[..]);
        assert_eq!(reader.next(&mut buf), Err(ReadError::Type(42)));
        let mut buf = BytesMut::from(&app_record(3, 1, b"short", 0)[..]);
        assert_eq!(reader.next(&mut buf), Err(ReadError::EndLength(5)));
        let mut buf = BytesMut::from(&app_record(5, 1, b"", 0)[..]);
        assert_eq!(
            reader.next(&mut buf),
            Err(ReadError::Unexpected(Kind::Stdin))
        );
    }
}
