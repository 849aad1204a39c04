//! A small movie written box by box, for the tests and the fuzz target's seed: a video track
//! (1000 units a second, 30 samples of 100, keyframes at samples 0, 10 and 20, three samples a
//! chunk, composition offsets, an edit list) and a sound track (8000 units a second, 60
//! samples of 400, 8 bytes each, three a chunk), their chunks interleaved by time. Each sample's
//! bytes name it: `V` or `A`, then its number repeated. [`movie_with`] makes it with 64-bit
//! chunk offsets (`co64`), larger samples, or zero bytes before the first chunk (past 4 GiB,
//! without holding them: [`Movie`]).

use super::boxes::write_box;

fn full(version_flags: u32, fields: &[u32]) -> Vec<u8> {
    let mut p = version_flags.to_be_bytes().to_vec();
    for f in fields {
        p.extend_from_slice(&f.to_be_bytes());
    }
    p
}

fn boxed(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_box(&mut out, kind, payload);
    out
}

struct Track {
    kind: u8,
    timescale: u32,
    delta: u32,
    sizes: Vec<u32>,
    per_chunk: usize,
    sync: Option<Vec<u32>>,
    ctts: bool,
}

impl Track {
    fn chunks(&self) -> usize {
        self.sizes.len().div_ceil(self.per_chunk)
    }

    fn sample(&self, i: usize) -> Vec<u8> {
        let mut b = vec![i as u8; self.sizes[i] as usize];
        b[0] = self.kind;
        b
    }

    fn trak(&self, id: u32, offsets: &[u64], co64: bool) -> Vec<u8> {
        let n = self.sizes.len() as u32;
        let duration = n * self.delta;
        let movie_duration = duration * 1000 / self.timescale;
        let mut tkhd = full(0, &[0, 0, id, 0, movie_duration]);
        tkhd.extend_from_slice(&[0u8; 60]);
        let mut stbl = Vec::new();
        stbl.extend(boxed(b"stsd", &full(0, &[0])));
        stbl.extend(boxed(b"stts", &full(0, &[1, n, self.delta])));
        if self.ctts {
            stbl.extend(boxed(b"ctts", &full(0, &[1, n, self.delta * 2])));
        }
        if let Some(sync) = &self.sync {
            let mut p = full(0, &[sync.len() as u32]);
            sync.iter()
                .for_each(|s| p.extend_from_slice(&s.to_be_bytes()));
            stbl.extend(boxed(b"stss", &p));
        }
        stbl.extend(boxed(b"stsc", &full(0, &[1, 1, self.per_chunk as u32, 1])));
        let constant = self.sizes.windows(2).all(|w| w[0] == w[1]);
        let mut stsz = if constant {
            full(0, &[self.sizes[0], n])
        } else {
            full(0, &[0, n])
        };
        if !constant {
            self.sizes
                .iter()
                .for_each(|s| stsz.extend_from_slice(&s.to_be_bytes()));
        }
        stbl.extend(boxed(b"stsz", &stsz));
        let mut stco = full(0, &[offsets.len() as u32]);
        for &o in offsets {
            if co64 {
                stco.extend_from_slice(&o.to_be_bytes());
            } else {
                stco.extend_from_slice(&(o as u32).to_be_bytes());
            }
        }
        stbl.extend(boxed(if co64 { b"co64" } else { b"stco" }, &stco));
        let minf = boxed(b"stbl", &stbl);
        let mut mdia = boxed(b"mdhd", &full(0, &[0, 0, self.timescale, duration, 0]));
        mdia.extend(boxed(
            b"hdlr",
            &full(0, &[0, u32::from_be_bytes(*b"vide"), 0, 0, 0]),
        ));
        mdia.extend(boxed(b"minf", &minf));
        let mut trak = boxed(b"tkhd", &tkhd);
        trak.extend(boxed(
            b"edts",
            &boxed(b"elst", &full(0, &[1, movie_duration, 0, 0x10000])),
        ));
        trak.extend(boxed(b"mdia", &mdia));
        boxed(b"trak", &trak)
    }
}

/// How a sample movie is made ([`movie_with`]).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The `moov` before the `mdat` (fast start), or after it.
    pub fast_start: bool,
    /// 64-bit chunk offsets (`co64`) instead of `stco`.
    pub co64: bool,
    /// Every sample is this many times larger (1: the small movie).
    pub scale: u32,
    /// Zero bytes at the start of the `mdat`, before the first chunk (a `lead` past 4 GiB
    /// puts every chunk offset there; the mdat header then has a 64-bit size).
    pub lead: u64,
}

impl Options {
    /// The small movie, fast start or not, with `stco`.
    pub fn small(fast_start: bool) -> Options {
        Options {
            fast_start,
            co64: false,
            scale: 1,
            lead: 0,
        }
    }
}

/// A movie in its parts, so that one with a long `lead` need not be held: the file is
/// `head` (the `ftyp`, then for fast start the `moov`; then the `mdat` header), `lead` zero
/// bytes, `data` (the chunks), then `tail` (the `moov` when it comes after the `mdat`).
#[derive(Debug, Clone)]
pub struct Movie {
    pub head: Vec<u8>,
    pub lead: u64,
    pub data: Vec<u8>,
    pub tail: Vec<u8>,
}

impl Movie {
    /// The file's length.
    pub fn len(&self) -> u64 {
        (self.head.len() + self.data.len() + self.tail.len()) as u64 + self.lead
    }

    /// Never: a movie has boxes.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The file's bytes `at .. at + n` (fewer only at its end).
    pub fn read(&self, at: u64, n: usize) -> Vec<u8> {
        let end = at.saturating_add(n as u64).min(self.len());
        let mut out = Vec::new();
        let mut pos = 0u64;
        let zeros = Zeros(self.lead);
        let parts: [&dyn Part; 4] = [&self.head, &zeros, &self.data, &self.tail];
        for part in parts {
            let (lo, hi) = (at.max(pos), end.min(pos + part.len()));
            if lo < hi {
                part.put(&mut out, lo - pos, hi - pos);
            }
            pos += part.len();
        }
        out
    }

    /// The whole file (its `lead` must be small).
    pub fn bytes(&self) -> Vec<u8> {
        self.read(0, usize::try_from(self.len()).unwrap_or(usize::MAX))
    }
}

/// A part of a [`Movie`]: bytes, or zeros.
trait Part {
    fn len(&self) -> u64;
    fn put(&self, out: &mut Vec<u8>, from: u64, to: u64);
}

impl Part for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn put(&self, out: &mut Vec<u8>, from: u64, to: u64) {
        out.extend_from_slice(&self[from as usize..to as usize]);
    }
}

struct Zeros(u64);

impl Part for Zeros {
    fn len(&self) -> u64 {
        self.0
    }
    fn put(&self, out: &mut Vec<u8>, from: u64, to: u64) {
        out.resize(out.len() + (to - from) as usize, 0);
    }
}

/// The small movie, `moov` before `mdat` (`fast_start`) or after it.
pub fn movie(fast_start: bool) -> Vec<u8> {
    movie_with(Options::small(fast_start)).bytes()
}

/// The movie as `o` says.
pub fn movie_with(o: Options) -> Movie {
    let scale = o.scale.max(1);
    let tracks = [
        Track {
            kind: b'V',
            timescale: 1000,
            delta: 100,
            sizes: (0..30).map(|i| (20 + i) * scale).collect(),
            per_chunk: 3,
            sync: Some(vec![1, 11, 21]),
            ctts: true,
        },
        Track {
            kind: b'A',
            timescale: 8000,
            delta: 400,
            sizes: vec![8 * scale; 60],
            per_chunk: 3,
            sync: None,
            ctts: false,
        },
    ];
    // Chunks in time order: (start in ms, track, chunk).
    let mut order: Vec<(u64, usize, usize)> = Vec::new();
    for (t, track) in tracks.iter().enumerate() {
        for c in 0..track.chunks() {
            let ms = (c * track.per_chunk) as u64 * u64::from(track.delta) * 1000
                / u64::from(track.timescale);
            order.push((ms, t, c));
        }
    }
    order.sort();
    let mut data = Vec::new();
    let mut at: Vec<Vec<u64>> = tracks.iter().map(|t| vec![0; t.chunks()]).collect();
    for &(_, t, c) in &order {
        at[t][c] = data.len() as u64;
        let track = &tracks[t];
        let first = c * track.per_chunk;
        for s in first..(first + track.per_chunk).min(track.sizes.len()) {
            data.extend(track.sample(s));
        }
    }
    let ftyp = boxed(b"ftyp", b"isom\0\0\x02\0isomiso2mp41");
    let moov = |base: u64| {
        let mut m = boxed(b"mvhd", &{
            let mut p = full(0, &[0, 0, 1000, 3000, 0x10000]);
            p.extend_from_slice(&[0u8; 80]);
            p
        });
        for (t, track) in tracks.iter().enumerate() {
            let offsets: Vec<u64> = at[t].iter().map(|a| base + a).collect();
            m.extend(track.trak(t as u32 + 1, &offsets, o.co64));
        }
        boxed(b"moov", &m)
    };
    let mdat_size = o.lead + data.len() as u64 + 8;
    let mdat = if mdat_size <= u64::from(u32::MAX) {
        boxed_header(b"mdat", mdat_size as u32)
    } else {
        let mut h = 1u32.to_be_bytes().to_vec();
        h.extend_from_slice(b"mdat");
        h.extend_from_slice(&(mdat_size + 8).to_be_bytes());
        h
    };
    let moov_len = moov(0).len() as u64;
    let mut head = ftyp;
    let before = head.len() as u64 + mdat.len() as u64 + o.lead;
    let (moov, tail) = if o.fast_start {
        (moov(before + moov_len), Vec::new())
    } else {
        (Vec::new(), moov(before))
    };
    head.extend(moov);
    head.extend(mdat);
    Movie {
        head,
        lead: o.lead,
        data,
        tail,
    }
}

/// A box header of `size` bytes.
fn boxed_header(kind: &[u8; 4], size: u32) -> Vec<u8> {
    let mut h = size.to_be_bytes().to_vec();
    h.extend_from_slice(kind);
    h
}
