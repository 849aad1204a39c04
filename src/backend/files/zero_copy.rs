//! Zero-copy sending of a file's bytes (sendfile(2)) on a cleartext HTTP/1.1 connection.
//!
//! hyper writes a response's body from the `Bytes` frames the body gives it; it cannot be told
//! to send a file. So the file's body, once the session said its connection can send files
//! ([`ZeroCopy::enable`]), gives *placeholder* frames instead of the file's bytes: slices of
//! one never-written buffer of zeros, each announced first as a [`Region`] of the file in the
//! connection's queue ([`Regions`]). hyper frames and counts them like any bytes (the
//! `Content-Length` was announced from `fstat`) and hands them to the session's gate in its
//! vectored writes; the gate knows a placeholder by its address alone, and sends the file's
//! bytes with sendfile(2) in its place (`server/h1/sendfile.rs`), telling hyper the same
//! number of bytes as written. The bytes before a placeholder (the response head, a multipart
//! boundary) go out first with a plain write.
//!
//! Only the body hyper itself writes is ever switched: the session switches a response's body
//! only when it reaches hyper as the files origin gave it (`ResponseBody::zero_copy`: a body
//! stored in the cache, filtered, sliced or chained is read as bytes), and only on a
//! connection whose gate sends files (plain TCP: not TLS, not HTTP/2). A placeholder the gate
//! cannot place (a region out of step, a transport that cannot send files) fails the write and
//! the connection is closed: zeros are never sent as a file's bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

use super::open::{Opened, Stat};

/// The most one placeholder frame stands for (address space only: the buffer is allocated
/// zeroed, so its pages are never touched, and hyper stops asking for frames once it holds
/// its write buffer's worth).
pub(crate) const PLACEHOLDER_LEN: usize = 4 << 20;

/// File parts shorter than this are read and written as bytes: for them a system call of
/// its own costs more than the copy.
pub(crate) const MIN_ZERO_COPY: u64 = 32 * 1024;

fn placeholder() -> &'static [u8] {
    static BUFFER: OnceLock<&'static [u8]> = OnceLock::new();
    BUFFER.get_or_init(|| Vec::leak(vec![0u8; PLACEHOLDER_LEN]))
}

/// A placeholder frame of `len` bytes (at most [`PLACEHOLDER_LEN`]).
fn placeholder_frame(len: usize) -> Bytes {
    Bytes::from_static(&placeholder()[..len.min(PLACEHOLDER_LEN)])
}

/// Where `slice` starts inside the placeholder buffer, if it is (a suffix of) a placeholder.
pub(crate) fn placeholder_offset(slice: &[u8]) -> Option<usize> {
    let base = placeholder().as_ptr() as usize;
    let at = slice.as_ptr() as usize;
    (!slice.is_empty() && at >= base && at < base + PLACEHOLDER_LEN).then(|| at - base)
}

/// Bytes `offset .. offset + len` of an open file, standing behind one placeholder frame.
pub(crate) struct Region {
    pub file: Arc<Opened>,
    pub offset: u64,
    pub len: u64,
    /// What the file was when the response head was made.
    pub stat: Stat,
    /// The region ends its part of the body: before its last bytes go out the file must still
    /// be what it was (`stat`), as `body.rs` checks before its last piece.
    pub last: bool,
}

impl Region {
    /// Whether the file is still what it was when the response head was made.
    pub fn unchanged(&self) -> bool {
        Stat::of(&self.file.file).is_ok_and(|now| now == self.stat)
    }

    /// The file's descriptor.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.file.file.as_fd()
    }
}

/// A connection's regions, in the order their placeholders were given to hyper (which writes
/// them in that order).
#[derive(Default)]
pub(crate) struct Regions {
    queue: Mutex<VecDeque<Region>>,
    /// Regions queued: a plain load tells the gate's writes whether to look for placeholders.
    queued: AtomicUsize,
}

impl Regions {
    pub fn new() -> Arc<Regions> {
        Arc::new(Regions::default())
    }

    fn push(&self, region: Region) {
        if let Ok(mut q) = self.queue.lock() {
            q.push_back(region);
            self.queued.fetch_add(1, Ordering::Release);
        }
    }

    /// Whether any placeholder is waiting to be sent.
    pub fn pending(&self) -> bool {
        self.queued.load(Ordering::Acquire) != 0
    }

    /// Runs `f` on the oldest region; it is removed when `f` says it is done.
    pub fn with_front<R>(&self, f: impl FnOnce(Option<&Region>) -> (R, bool)) -> R {
        let Ok(mut q) = self.queue.lock() else {
            return f(None).0;
        };
        let (r, done) = f(q.front());
        if done && q.pop_front().is_some() {
            self.queued.fetch_sub(1, Ordering::Release);
        }
        r
    }
}

/// A file body's switch to placeholders, shared by the body and its response (moved into
/// `BackendBody`), thrown by the session once the response is on its way to hyper.
#[derive(Default)]
pub(crate) struct ZeroCopy {
    regions: OnceLock<Arc<Regions>>,
}

impl ZeroCopy {
    /// From now on the body's file parts go out through `regions`' connection.
    pub fn enable(&self, regions: &Arc<Regions>) {
        let _ = self.regions.set(regions.clone());
    }

    /// A placeholder for the first bytes of `start..end` of `file` (at most
    /// [`PLACEHOLDER_LEN`]), or `None` while not enabled or for fewer than [`MIN_ZERO_COPY`]
    /// bytes. Returns the frame and the bytes it stands for.
    pub(super) fn region(
        &self,
        file: &Arc<Opened>,
        stat: Stat,
        start: u64,
        end: u64,
    ) -> Option<(Bytes, u64)> {
        let regions = self.regions.get()?;
        if end.saturating_sub(start) < MIN_ZERO_COPY {
            return None;
        }
        let len = (end - start).min(PLACEHOLDER_LEN as u64);
        regions.push(Region {
            file: file.clone(),
            offset: start,
            len,
            stat,
            last: start + len == end,
        });
        Some((placeholder_frame(len as usize), len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_known_by_address_only() {
        let frame = placeholder_frame(100);
        assert_eq!(placeholder_offset(&frame), Some(0));
        assert_eq!(placeholder_offset(&frame[40..]), Some(40));
        assert_eq!(placeholder_offset(&[0u8; 100]), None);
        assert_eq!(placeholder_offset(&frame[100..]), None);
        let zeros = vec![0u8; 100];
        assert_eq!(placeholder_offset(&zeros), None);
    }
}
