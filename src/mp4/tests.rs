use super::boxes::Boxes;
use super::late;
use super::sample::movie;
use super::trak::Trak;
use super::*;

const MAX: usize = 1 << 20;

fn layout(file: &[u8]) -> Layout {
    match scan(file, MAX) {
        Scan::Ready(l) => l,
        other => panic!("{other:?}"),
    }
}

/// The answer for a cut: its head, then the file's bytes it names.
fn answer(file: &[u8], cut: &Cut) -> Vec<u8> {
    let mut out = cut.head.clone();
    let to = cut.to.map_or(file.len(), |t| t as usize);
    out.extend_from_slice(&file[cut.from as usize..to]);
    out
}

/// Each track's samples' bytes, read through its tables.
fn samples(file: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let l = layout(file);
    let moov = &file[l.moov.clone()];
    let mut out = Vec::new();
    for b in Boxes::new(&moov[8..]) {
        let (kind, payload) = b.unwrap();
        if &kind == b"trak" {
            let t = Trak::read(payload).unwrap();
            out.push(
                t.sample_ranges()
                    .iter()
                    .map(|&(at, len)| file[at as usize..(at + len) as usize].to_vec())
                    .collect(),
            );
        }
    }
    out
}

#[test]
fn the_sample_movie_reads_back() {
    let file = movie(true);
    let s = samples(&file);
    assert_eq!((s[0].len(), s[1].len()), (30, 60));
    assert_eq!(s[0][7][0], b'V');
    assert!(s[0][7][1..].iter().all(|&b| b == 7));
    assert_eq!(s[1][59], [b'A', 59, 59, 59, 59, 59, 59, 59]);
}

#[test]
fn scan_finds_the_boxes_or_asks_for_more() {
    let file = movie(true);
    let l = layout(&file);
    assert_eq!(l.ftyp, Some(0..28));
    assert_eq!(l.mdat_end, Some(file.len() as u64));
    assert!(matches!(scan(&file[..30], MAX), Scan::More(n) if n > 30));
    assert!(matches!(scan(&file[..l.moov.end - 1], MAX), Scan::More(n) if n == l.moov.end));
    assert!(matches!(scan(&file, 100), Scan::Bad(_)));
    let late = movie(false);
    let Scan::MoovAfterMdat(l) = scan(&late, MAX) else {
        panic!("the moov after the mdat");
    };
    assert_eq!((l.ftyp, l.mdat_data), (Some(0..28), 36));
    assert!(l.mdat_end.is_some_and(|e| e < late.len() as u64));
}

#[test]
fn a_cut_starts_at_the_keyframe_before_and_keeps_sound_with_it() {
    let file = movie(true);
    let l = layout(&file);
    // 1.5 s is sample 15 of the video; its keyframe is sample 10, at 1.0 s; the sound is cut
    // at 1.0 s too (sample 20 of 400 units at 8000 a second).
    let cut = cut(&file, &l, 1.5).unwrap().unwrap();
    assert_eq!(cut.start, 1.0);
    let out = answer(&file, &cut);
    let got = samples(&out);
    let all = samples(&file);
    assert_eq!(got[0], all[0][10..]);
    assert_eq!(got[1], all[1][20..]);
    // The tables start there: the first sample is a keyframe, durations are shorter.
    let l2 = layout(&out);
    assert_eq!(l2.mdat_end, Some(out.len() as u64));
    let cut2 = super::cut(&out, &l2, 1.0).unwrap().unwrap();
    let twice = answer(&out, &cut2);
    assert_eq!(samples(&twice)[0], all[0][20..]);
    assert_eq!(cut2.start, 1.0);
}

#[test]
fn a_cut_inside_a_chunk_keeps_the_rest_of_the_chunk() {
    let file = movie(true);
    let l = layout(&file);
    // 2.05 s: keyframe 20 (2.0 s), the second sample of video chunk 6; sound sample 40
    // (2.0 s), the second of its chunk 13: both chunks are split.
    let cut = cut(&file, &l, 2.05).unwrap().unwrap();
    assert_eq!(cut.start, 2.0);
    let got = samples(&answer(&file, &cut));
    let all = samples(&file);
    assert_eq!(got[0], all[0][20..]);
    assert_eq!(got[1], all[1][40..]);
}

#[test]
fn no_cut_before_the_first_keyframe_past_the_end_an_error() {
    let file = movie(true);
    let l = layout(&file);
    assert_eq!(cut(&file, &l, 0.0), Ok(None));
    assert_eq!(cut(&file, &l, 0.9), Ok(None));
    assert_eq!(cut(&file, &l, f64::NAN), Ok(None));
    assert!(cut(&file, &l, 3.5).is_err());
}

#[test]
fn damaged_movies_are_errors_never_panics() {
    let file = movie(true);
    let l = layout(&file);
    for end in (l.moov.start..l.moov.end).step_by(7) {
        let mut f = file.clone();
        f.truncate(end);
        let _ = scan(&f, MAX);
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        let mut f = file.clone();
        for _ in 0..3 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = l.moov.start + (state as usize % l.moov.len());
            f[at] ^= (state >> 32) as u8 | 1;
        }
        if let Scan::Ready(l) = scan(&f, MAX) {
            let _ = cut(&f, &l, 1.5);
            let _ = cut_span(&f, &l, 0.0, Some(2.0));
        }
    }
}

#[test]
fn an_end_keeps_the_samples_before_it_and_the_data_up_to_them() {
    let file = movie(true);
    let l = layout(&file);
    let all = samples(&file);
    // From 1.5 s (keyframe 1.0 s) to 2.05 s: video samples 10..21 (2.0 s is sample 20, 2.1 s
    // the first at or after 2.05), sound 20..41 (400 units each: 2.05 s is 16400, sample 41).
    let cut = cut_span(&file, &l, 1.5, Some(2.05)).unwrap().unwrap();
    assert_eq!(cut.start, 1.0);
    assert!(cut.to.is_some_and(|t| t < file.len() as u64));
    let out = answer(&file, &cut);
    let got = samples(&out);
    assert_eq!(got[0], all[0][10..21]);
    assert_eq!(got[1], all[1][20..41]);
    let l2 = layout(&out);
    assert_eq!(l2.mdat_end, Some(out.len() as u64));
    // From the beginning to an end: nothing goes before, the tables end there.
    let cut = cut_span(&file, &l, 0.0, Some(1.0)).unwrap().unwrap();
    assert_eq!(cut.start, 0.0);
    let got = samples(&answer(&file, &cut));
    assert_eq!(got[0], all[0][..10]);
    assert_eq!(got[1], all[1][..20]);
    // An end at or before the start is no end; past the file's end, everything is kept.
    assert_eq!(
        cut_span(&file, &l, 1.5, Some(1.0)),
        super::cut(&file, &l, 1.5)
    );
    assert_eq!(cut_span(&file, &l, 0.0, None), Ok(None));
    let whole = cut_span(&file, &l, 1.5, Some(99.0)).unwrap().unwrap();
    let got = samples(&answer(&file, &whole));
    assert_eq!(got[0], all[0][10..]);
    assert_eq!(got[1], all[1][20..]);
}

/// A file whose moov is after its mdat: where it says its boxes are, and its moov read
/// through the box headers after the mdat.
fn late_parts(file: &[u8]) -> (Late, Vec<u8>) {
    let Scan::MoovAfterMdat(l) = scan(file, MAX) else {
        panic!("not a late moov");
    };
    let moov = l
        .find_moov(file.len() as u64, MAX, &mut late::read_in(file))
        .unwrap();
    (l, moov)
}

#[test]
fn a_moov_after_the_mdat_is_found_read_and_cut_like_a_fast_start_one() {
    let (late, fast) = (movie(false), movie(true));
    let (l, moov) = late_parts(&late);
    assert_eq!(l.ftyp, Some(0..28));
    assert_eq!(l.mdat_data, 36);
    assert!(late.ends_with(&moov) && &moov[4..8] == b"moov");
    let fl = layout(&fast);
    for (start, end) in [
        (1.5, None),
        (2.05, None),
        (1.5, Some(2.05)),
        (0.0, Some(1.0)),
    ] {
        let c = l.cut(&late, &moov, start, end).unwrap().unwrap();
        // The data stops at the mdat's end: the old moov after it is not sent.
        assert!(c.to.is_some_and(|t| t <= l.mdat_end.unwrap()));
        let f = cut_span(&fast, &fl, start, end).unwrap().unwrap();
        assert_eq!(c.start, f.start);
        assert!(answer(&late, &c) == answer(&fast, &f), "{start}..{end:?}");
    }
    // Byte by byte: the answer parses, its chunk offsets point at the samples from the
    // keyframe at or before the start (video sample 10 at 1.0 s for 1.5 s) on.
    let out = answer(&late, &l.cut(&late, &moov, 1.5, None).unwrap().unwrap());
    let (got, all) = (samples(&out), samples(&fast));
    assert_eq!(got[0], all[0][10..]);
    assert_eq!(got[0][0][..2], [b'V', 10]);
    assert_eq!(got[1], all[1][20..]);
    // Before the second keyframe: nothing to cut.
    assert_eq!(l.cut(&late, &moov, 0.5, None), Ok(None));
}

#[test]
fn a_late_moov_over_the_bound_cut_short_or_missing_is_bad_never_a_panic() {
    let late = movie(false);
    let (l, moov) = late_parts(&late);
    let len = late.len() as u64;
    assert!(
        l.find_moov(len, moov.len() - 1, &mut late::read_in(&late))
            .is_err()
    );
    // A moov that ends past the reach is refused by its header: the moov is never read.
    let mut reads = Vec::new();
    let mut read = |at: u64, n: usize| {
        reads.push(n);
        late::read_in(&late)(at, n)
    };
    assert_eq!(
        l.find_moov_within(len, MAX, len - 1, &mut read),
        Err(Bad(late::PAST_REACH))
    );
    assert!(reads.iter().all(|&n| n <= 16), "{reads:?}");
    assert_eq!(
        l.find_moov_within(len, MAX, len, &mut late::read_in(&late)),
        Ok(moov.clone())
    );
    let short = &late[..late.len() - 1];
    assert!(
        l.find_moov(short.len() as u64, MAX, &mut late::read_in(short))
            .is_err()
    );
    let bare = &late[..l.mdat_end.unwrap() as usize];
    assert!(
        l.find_moov(bare.len() as u64, MAX, &mut late::read_in(bare))
            .is_err()
    );
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let at = late.len() - moov.len();
    for _ in 0..3000 {
        let mut f = late.clone();
        for _ in 0..3 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let i = at + (state as usize % moov.len());
            f[i] ^= (state >> 32) as u8 | 1;
        }
        if let Scan::MoovAfterMdat(l) = scan(&f, MAX)
            && let Ok(m) = l.find_moov(f.len() as u64, MAX, &mut late::read_in(&f))
            && let Ok(Some(c)) = l.cut(&f, &m, 1.5, None)
        {
            assert!(c.from >= l.mdat_data && c.to <= l.mdat_end);
        }
    }
}

/// The answer for a cut of a movie held in parts (`sample::Movie`).
fn answer_of(m: &super::sample::Movie, cut: &Cut) -> Vec<u8> {
    let to = cut.to.unwrap_or(m.len());
    let mut out = cut.head.clone();
    out.extend(m.read(cut.from, (to - cut.from) as usize));
    out
}

fn has_box(file: &[u8], kind: &[u8; 4]) -> bool {
    file.windows(4).any(|w| w == kind)
}

/// 64-bit chunk offsets (`co64`): a file with them is cut as one with `stco` (the same
/// samples), and its answer keeps `co64`. With the data past 4 GiB (a 5 GiB lead of zeros in
/// the mdat, not held), every offset is shifted from there to just after the new head, in 64
/// bits; the fast-start file and the one whose moov comes after its mdat give the same answer.
#[test]
fn co64_offsets_past_4_gib_are_shifted_to_the_new_head_and_kept_64_bit() {
    use super::sample::{Options, movie_with};
    let all = samples(&movie(true));
    let small = movie_with(Options {
        co64: true,
        ..Options::small(true)
    })
    .bytes();
    assert!(has_box(&small, b"co64") && !has_box(&small, b"stco"));
    assert_eq!(samples(&small), all);
    let c = cut(&small, &layout(&small), 1.5).unwrap().unwrap();
    let out = answer(&small, &c);
    assert!(has_box(&out, b"co64") && !has_box(&out, b"stco"));
    assert_eq!(samples(&out)[0], all[0][10..]);
    assert_eq!(samples(&out)[1], all[1][20..]);
    let lead = 5 << 30;
    let mut answers = Vec::new();
    for fast_start in [true, false] {
        let m = movie_with(Options {
            fast_start,
            co64: true,
            scale: 1,
            lead,
        });
        assert!(m.len() > lead);
        let c = match scan(&m.head, MAX) {
            Scan::Ready(l) => {
                assert!(l.mdat_data > 0 && l.mdat_end == Some(m.len()));
                cut(&m.head, &l, 1.5).unwrap().unwrap()
            }
            Scan::MoovAfterMdat(l) => {
                let mut read = |at, n| Ok(m.read(at, n));
                let moov = l.find_moov(m.len(), MAX, &mut read).unwrap();
                assert!(moov == m.tail);
                l.cut(&m.head, &moov, 1.5, None).unwrap().unwrap()
            }
            other => panic!("{other:?}"),
        };
        assert!(c.from > lead && c.from > u64::from(u32::MAX));
        let out = answer_of(&m, &c);
        assert!(has_box(&out, b"co64") && !has_box(&out, b"stco"));
        let got = samples(&out);
        assert_eq!(got[0], all[0][10..], "fast start {fast_start}");
        assert_eq!(got[1], all[1][20..], "fast start {fast_start}");
        // The first kept chunk (video sample 10) starts right after the new head.
        let l = layout(&out);
        assert_eq!(l.mdat_data, c.head.len() as u64);
        answers.push(out);
    }
    assert!(answers[0] == answers[1]);
}

/// nginx's mp4.t movie (tests/range/fixtures: two video tracks, 10 s and 20 s, a keyframe
/// every second, made by ffmpeg): a start past the short track cuts the long one at its
/// keyframe and keeps the short one as an empty track, as nginx does; past both, an error.
#[test]
fn a_start_past_a_short_track_leaves_it_empty() {
    let file = include_bytes!("../../tests/range/fixtures/faststart.mp4");
    let l = layout(file);
    let all = samples(file);
    assert_eq!((all[0].len(), all[1].len()), (150, 300));
    let c = cut(file, &l, 11.5).unwrap().unwrap();
    assert_eq!(c.start, 11.0);
    let got = samples(&answer(file, &c));
    assert!(got[0].is_empty());
    assert_eq!(got[1], all[1][165..]);
    // With an end too: the long track up to it, the short one still empty.
    let c = cut_span(file, &l, 11.0, Some(12.0)).unwrap().unwrap();
    let got = samples(&answer(file, &c));
    assert!(got[0].is_empty());
    assert_eq!(got[1], all[1][165..180]);
    assert!(cut(file, &l, 21.0).is_err());
    assert!(cut(file, &l, 20.0).is_err());
}
