//! FLV pseudo-streaming (nginx's `flv` module), a delivery filter: a request for an FLV file
//! with `?start=BYTE` is answered with the 13-byte FLV file header, then the file from that
//! byte on (a player seeks by asking for the offset of a keyframe). The `start` argument is
//! taken off the request before the cache key (`proxy/policy/rules.rs`), so every seek is
//! served from the one stored file, or from one fetch of it. The filter is put on the
//! delivery chain only for what it can cut (`Txn::flv_filter`, `respond.rs`): a `200`
//! without a content coding whose length, when known, is beyond the offset — anything else
//! is sent as it is, as nginx sends the whole file for an offset past its end.

use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http::header::{self, HeaderMap};

use super::{BodyFilter, Chunks, Effect, FilterError, seek};

/// What nginx sends before the bytes from the offset: `FLV`, version 1, audio and video,
/// a 9-byte header, then the first (zero) previous-tag size.
pub const HEADER: &[u8; 13] = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00";

/// `start=N` of a query (the last one, as nginx's `$arg_start`), when it is a positive whole
/// number.
pub fn start_of(query: &str) -> Option<u64> {
    seek::start_arg(query)
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&n| n > 0)
}

/// Whether the query's `start` (the last one) is zero (`0`, `00`): from the beginning, the
/// file as nginx sends it — still a seek, looked up and stored without it, so a player's
/// first `?start=0` shares the one stored copy.
pub fn starts_at_zero(query: &str) -> bool {
    seek::start_arg(query).is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b == b'0'))
}

/// The query without its `start` arguments (`None`: none left).
pub fn without_start(query: &str) -> Option<String> {
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.is_empty() && *pair != "start" && !pair.starts_with("start="))
        .collect();
    (!kept.is_empty()).then(|| kept.join("&"))
}

/// The filter of one request seeking to `start`.
pub struct Flv {
    header_sent: bool,
    /// Input bytes still to drop.
    skip: u64,
    /// The answer's length, when the file's is known (`with_length`).
    length: Option<u64>,
}

impl Flv {
    pub fn new(start: u64) -> Flv {
        Flv {
            header_sent: false,
            skip: start,
            length: None,
        }
    }

    /// The file's length, when known: the answer's is then known up front (the header and
    /// the bytes from the offset), so it has a `Content-Length` and a `Range` is cut from it
    /// (`deliver.rs`), as nginx's range filter takes the `flv` module's output.
    pub fn with_length(mut self, len: Option<u64>) -> Flv {
        self.length = len
            .filter(|&len| self.skip < len)
            .map(|len| HEADER.len() as u64 + len - self.skip);
        self
    }

    /// Whether a response of this status, fields and length (when known) is cut at `start`.
    pub fn applies(start: u64, status: StatusCode, fields: &HeaderMap, len: Option<u64>) -> bool {
        status == StatusCode::OK
            && !fields.contains_key(header::CONTENT_ENCODING)
            && len.is_none_or(|len| start < len)
    }
}

impl BodyFilter for Flv {
    fn name(&self) -> &'static str {
        "flv"
    }

    fn effect(&self, _status: StatusCode, _fields: &HeaderMap) -> Effect {
        Effect {
            changes_length: true,
            storable: true,
        }
    }

    fn output(&self, _fields: &HeaderMap) -> Option<super::Output> {
        self.length
            .map(|length| super::Output { length, etag: None })
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        if !self.header_sent {
            self.header_sent = true;
            return Poll::Ready(Some(Ok(Bytes::from_static(HEADER))));
        }
        loop {
            match std::task::ready!(input.poll_chunk(cx)) {
                Some(Ok(chunk)) if self.skip > 0 => {
                    if let Some(rest) = seek::skip(chunk, &mut self.skip) {
                        return Poll::Ready(Some(Ok(rest)));
                    }
                }
                other => return Poll::Ready(other),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_length_is_known_with_the_files() {
        let f = Flv::new(100).with_length(Some(1000));
        assert_eq!(f.output(&HeaderMap::new()).map(|o| o.length), Some(913));
        assert!(Flv::new(100).output(&HeaderMap::new()).is_none());
        assert!(Flv::new(1000).with_length(Some(1000)).length.is_none());
    }

    #[test]
    fn start_is_read_and_taken_off() {
        assert_eq!(start_of("start=100"), Some(100));
        assert_eq!(start_of("a=1&start=5&b=2"), Some(5));
        assert_eq!(start_of("start=0"), None);
        assert!(starts_at_zero("start=0") && starts_at_zero("a=1&start=00"));
        assert!(!starts_at_zero("start=") && !starts_at_zero("start=05"));
        assert!(!starts_at_zero("start=0&start=7") && !starts_at_zero("restart=0"));
        assert_eq!(start_of("start=x"), None);
        assert_eq!(start_of("restart=5"), None);
        assert_eq!(without_start("start=100"), None);
        assert_eq!(without_start("a=1&start=5&b=2").as_deref(), Some("a=1&b=2"));
        assert_eq!(without_start("restart=5").as_deref(), Some("restart=5"));
    }
}
