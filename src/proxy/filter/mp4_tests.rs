//! The MP4 delivery filter's tests (`mp4.rs`): cuts however the file arrives, ends, what is
//! sent whole, a moov after the mdat held as the body streams, a stored file cut up front
//! (`mp4_precut.rs`).

use super::*;
use crate::mp4::held::Hold;
use crate::proxy::filter::mp4_precut::{Precut, precut};
use crate::proxy::filter::mp4_source::ReadAt;

struct Pieces(VecDeque<Bytes>);

impl Chunks for Pieces {
    fn poll_chunk(&mut self, _: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
}

/// A body whose next bytes have not come yet once these are read.
struct Stalled(VecDeque<Bytes>);

impl Chunks for Stalled {
    fn poll_chunk(&mut self, _: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        match self.0.pop_front() {
            Some(b) => Poll::Ready(Some(Ok(b))),
            None => Poll::Pending,
        }
    }
}

/// The filter's output for `file` arriving in pieces of `piece` bytes.
fn run(file: &[u8], piece: usize, start: f64, max: usize) -> (Vec<u8>, Arc<Counters>) {
    run_to(file, piece, (start, None), max)
}

fn run_to(
    file: &[u8],
    piece: usize,
    span: (f64, Option<f64>),
    max: usize,
) -> (Vec<u8>, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let mut f = Mp4::new(span, max, counters.clone(), "/m.mp4".into());
    let mut input = Pieces(file.chunks(piece).map(Bytes::copy_from_slice).collect());
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    while let Poll::Ready(Some(Ok(b))) = f.poll_chunk(&mut cx, &mut input) {
        out.extend_from_slice(&b);
    }
    (out, counters)
}

/// The layout of `file`, a fast-start sample.
fn layout_of(file: &[u8]) -> crate::mp4::Layout {
    let crate::mp4::Scan::Ready(layout) = crate::mp4::scan(file, 1 << 20) else {
        panic!("sample");
    };
    layout
}

/// What a cut of `file` (a fast-start sample) at `start` seconds sends: its new head, then
/// the file from the cut's keyframe.
fn cut_at(file: &[u8], start: f64) -> Vec<u8> {
    let cut = crate::mp4::cut(file, &layout_of(file), start)
        .unwrap()
        .unwrap();
    let mut want = cut.head.clone();
    want.extend_from_slice(&file[cut.from as usize..]);
    want
}

#[test]
fn the_file_is_cut_however_it_arrives() {
    let file = crate::mp4::sample::movie(true);
    let want = cut_at(&file, 1.5);
    for piece in [1, 7, 64, 500, 100_000] {
        let (out, counters) = run(&file, piece, 1.5, 1 << 20);
        assert!(out == want, "pieces of {piece}");
        assert_eq!(counters.mp4_seek_whole.get(), 0);
    }
    // Before the second keyframe: the file as it is.
    assert!(run(&file, 64, 0.5, 1 << 20).0 == file);
}

#[test]
fn an_end_stops_the_file_after_its_last_kept_sample_however_it_arrives() {
    let file = crate::mp4::sample::movie(true);
    let layout = layout_of(&file);
    for (start, end) in [(1.5, 2.05), (0.0, 1.0)] {
        let cut = crate::mp4::cut_span(&file, &layout, start, Some(end))
            .unwrap()
            .unwrap();
        let to = cut.to.unwrap() as usize;
        assert!(to < file.len());
        let mut want = cut.head.clone();
        want.extend_from_slice(&file[cut.from as usize..to]);
        for piece in [1, 7, 64, 500, 100_000] {
            let (out, counters) = run_to(&file, piece, (start, Some(end)), 1 << 20);
            assert!(out == want, "{start}..{end} in pieces of {piece}");
            assert_eq!(counters.mp4_seek_whole.get(), 0);
        }
    }
}

#[test]
fn start_and_end_leave_the_query_and_the_key() {
    assert_eq!(end_of("start=1&end=2.5"), Some(2.5));
    assert_eq!(end_of("end=0"), None);
    assert_eq!(end_of("friend=3"), None);
    assert_eq!(
        without_span("start=1&a=2&end=3&endless=4"),
        Some("a=2&endless=4".into())
    );
    assert_eq!(without_span("start=1&end=2"), None);
}

#[test]
fn what_cannot_be_cut_is_sent_whole_and_counted() {
    let file = crate::mp4::sample::movie(true);
    for (input, max) in [(&file, 200), (&file[..100].to_vec(), 1 << 20)] {
        let (out, counters) = run(input, 33, 1.5, max);
        assert!(out == *input);
        assert_eq!(counters.mp4_seek_whole.get(), 1);
    }
}

/// A moov after the mdat while the body streams: held until the moov is in, then cut as
/// the fast-start twin is; the moov's end past the bound: sent whole and counted.
#[test]
fn a_moov_after_the_mdat_is_cut_as_the_body_streams_within_the_bound() {
    let late = crate::mp4::sample::movie(false);
    let fast = crate::mp4::sample::movie(true);
    let (layout, want) = (layout_of(&fast), cut_at(&fast, 1.5));
    for piece in [1, 7, 500, 100_000] {
        let (out, counters) = run(&late, piece, 1.5, 1 << 20);
        assert!(out == want, "pieces of {piece}");
        assert_eq!(counters.mp4_seek_whole.get(), 0);
    }
    let crate::mp4::Scan::MoovAfterMdat(l) = crate::mp4::scan(&late, 1 << 20) else {
        panic!("sample");
    };
    let bound = l.mdat_end.unwrap() as usize + 8;
    assert!(late.len() - bound > 33 && layout.moov.len() <= bound);
    let (out, counters) = run(&late, 33, 1.5, bound);
    assert!(out == late);
    assert_eq!(counters.mp4_seek_whole.get(), 1);
}

/// A body read out of order: a file in memory.
struct InMemory(Vec<u8>);

impl ReadAt for InMemory {
    fn body_len(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_at(&self, at: u64, n: usize) -> Result<Vec<u8>, Bad> {
        crate::mp4::late::read_in(&self.0)(at, n)
    }
}

/// The cut made up front from a stored `file` (`mp4_precut.rs`) under a hold of `limit`.
fn precut_of(
    file: &[u8],
    span: (f64, Option<f64>),
    max: usize,
    limit: u64,
) -> Result<Option<Precut>, Bad> {
    let mut hold = Hold::new(Arc::default(), limit);
    precut(&InMemory(file.to_vec()), span, max, &mut hold)
}

/// The filter given the cut made up front, over `file` arriving in pieces of `piece` bytes.
fn run_cut(file: &[u8], piece: usize, cut: Precut) -> Vec<u8> {
    let mut f = Mp4::new((1.5, None), 1 << 20, Arc::default(), "/m.mp4".into()).with_cut(cut);
    let length = f.output(&http::HeaderMap::new()).map(|o| o.length);
    let mut input = Pieces(file.chunks(piece).map(Bytes::copy_from_slice).collect());
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    while let Poll::Ready(Some(Ok(b))) = f.poll_chunk(&mut cx, &mut input) {
        out.extend_from_slice(&b);
    }
    assert_eq!(length, Some(out.len() as u64), "the length told up front");
    out
}

/// A stored file cut up front (its first bytes and a moov after the mdat read out of order)
/// sends what the filter sends as the body streams — fast start or not, with an end or not —
/// and its length is known before; what the streaming filter sends whole (nothing to cut, a
/// moov over the bound or ending past it, the process's bound reached) is not cut up front
/// either.
#[test]
fn a_stored_file_cut_up_front_is_what_the_filter_cuts_as_it_streams() {
    use crate::proxy::filter::mp4_precut::MEMORY;
    let late = crate::mp4::sample::movie(false);
    let fast = crate::mp4::sample::movie(true);
    let layout = layout_of(&fast);
    for file in [&fast, &late] {
        for span in [(1.5, None), (1.5, Some(2.05)), (0.0, Some(1.0))] {
            let streamed = run_to(file, 64, span, 1 << 20).0;
            let cut = precut_of(file, span, 1 << 20, 1 << 30).unwrap().unwrap();
            for piece in [1, 500, 100_000] {
                assert!(
                    run_cut(file, piece, cut.clone()) == streamed,
                    "{span:?} {piece}"
                );
            }
        }
        assert_eq!(precut_of(file, (0.5, None), 1 << 20, 1 << 30), Ok(None));
    }
    assert!(
        run_cut(
            &late,
            64,
            precut_of(&late, (1.5, None), 1 << 20, 1 << 30)
                .unwrap()
                .unwrap()
        ) == cut_at(&fast, 1.5)
    );
    // Over the bound; a late moov ending past it (what streaming sends whole too).
    assert!(precut_of(&late, (1.5, None), layout.moov.len() - 1, 1 << 30).is_err());
    let crate::mp4::Scan::MoovAfterMdat(l) = crate::mp4::scan(&late, 1 << 20) else {
        panic!("sample");
    };
    let bound = l.mdat_end.unwrap() as usize + 8;
    assert_eq!(
        precut_of(&late, (1.5, None), bound, 1 << 30),
        Err(Bad(crate::mp4::late::PAST_REACH))
    );
    assert!(run(&late, 64, 1.5, bound).0 == late);
    // The process's bound on held bytes.
    assert_eq!(
        precut_of(&fast, (1.5, None), 1 << 20, 100),
        Err(Bad(MEMORY))
    );
    assert!(precut_of(&fast[..200], (1.5, None), 1 << 20, 1 << 30).is_err());
}

/// The process's bound on held bytes (`server.mp4_moov_memory`): a seek whose first bytes
/// would pass it is sent whole (`mp4_seek_memory`, `mp4_seek_whole`), fast start or not,
/// as the body streams; a cut seek gives back what it held once cut; a filter dropped while
/// it holds gives it back.
#[tokio::test]
async fn held_bytes_are_bounded_for_the_process() {
    use crate::mp4::held::MoovHeld;
    let fast = crate::mp4::sample::movie(true);
    let late = crate::mp4::sample::movie(false);
    let held = Arc::new(MoovHeld::default());
    let run_held = |file: &[u8], limit: u64, other: u64| {
        let counters = Arc::new(Counters::default());
        let mut taken = Hold::new(held.clone(), limit);
        assert!(taken.grow_to(other));
        let mut f = Mp4::new((1.5, None), 1 << 20, counters.clone(), "/m.mp4".into())
            .with_hold(Hold::new(held.clone(), limit));
        let mut input = Pieces(file.chunks(500).map(Bytes::copy_from_slice).collect());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(Ok(b))) = f.poll_chunk(&mut cx, &mut input) {
            out.extend_from_slice(&b);
            assert!(held.used() <= limit);
        }
        assert_eq!(held.used(), other, "the filter gave back what it held");
        (out, counters)
    };
    // Room enough: cut, both files.
    for file in [&fast, &late] {
        let (out, counters) = run_held(file, 4 << 20, 1 << 20);
        assert!(out != *file && out.len() < file.len());
        assert_eq!(counters.mp4_seek_memory.get(), 0);
    }
    // Another seek holds nearly all of it: sent whole, counted.
    for file in [&fast, &late] {
        let (out, counters) = run_held(file, 4 << 20, (4 << 20) - 1000);
        assert!(out == *file);
        assert_eq!(counters.mp4_seek_memory.get(), 1);
        assert_eq!(counters.mp4_seek_whole.get(), 1);
    }
    assert_eq!(held.used(), 0);
    // Dropped while holding (the client went away): given back.
    let mut f = Mp4::new((1.5, None), 1 << 20, Arc::default(), "/m.mp4".into())
        .with_hold(Hold::new(held.clone(), 4 << 20));
    let mut input = Stalled(
        late.chunks(100)
            .take(2)
            .map(Bytes::copy_from_slice)
            .collect(),
    );
    let mut cx = Context::from_waker(std::task::Waker::noop());
    while let Poll::Ready(Some(_)) = f.poll_chunk(&mut cx, &mut input) {}
    assert!(held.used() > 0);
    drop(f);
    assert_eq!(held.used(), 0);
}

#[test]
fn start_is_seconds() {
    assert_eq!(start_of("start=12.5"), Some(12.5));
    assert_eq!(start_of("a=1&start=3"), Some(3.0));
    assert_eq!(start_of("start=0"), None);
    assert_eq!(start_of("start=-1"), None);
    assert_eq!(start_of("start=1e3"), None);
    assert_eq!(start_of("start=inf"), None);
    assert_eq!(start_of("start="), None);
    for zero in ["start=0", "start=0.0", "a=1&start=00.000"] {
        assert!(starts_at_zero(zero), "{zero}");
    }
    for not in [
        "start=",
        "start=0.5",
        "start=-0",
        "start=0e1",
        "restart=0",
        "a=0",
    ] {
        assert!(!starts_at_zero(not), "{not}");
    }
}
