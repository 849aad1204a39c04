//! What the seeking delivery filters (`flv.rs`, `mp4.rs`) share: the `start` argument of a
//! query, and the input's bytes dropped up to an offset.

use bytes::Bytes;

/// The value of the last `start=` argument of a query (as nginx's `$arg_start`).
pub(super) fn start_arg(query: &str) -> Option<&str> {
    query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("start="))
        .next_back()
}

/// `chunk` with up to `left` of its first bytes dropped and `left` lessened by as many:
/// `None` when the whole chunk was dropped.
#[inline]
pub(super) fn skip(chunk: Bytes, left: &mut u64) -> Option<Bytes> {
    let len = chunk.len() as u64;
    if len <= *left {
        *left -= len;
        return None;
    }
    let from = usize::try_from(*left).unwrap_or(chunk.len());
    *left = 0;
    Some(chunk.slice(from..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_drops_up_to_the_offset_across_chunks() {
        let mut left = 5;
        assert_eq!(skip(Bytes::from_static(b"abc"), &mut left), None);
        assert_eq!(left, 2);
        assert_eq!(
            skip(Bytes::from_static(b"defgh"), &mut left),
            Some(Bytes::from_static(b"fgh"))
        );
        assert_eq!(left, 0);
        assert_eq!(
            skip(Bytes::from_static(b"ij"), &mut left),
            Some(Bytes::from_static(b"ij"))
        );
    }

    #[test]
    fn the_last_start_argument_counts() {
        assert_eq!(start_arg("start=1&a=2&start=3"), Some("3"));
        assert_eq!(start_arg("restart=1"), None);
    }
}
