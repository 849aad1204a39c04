//! A small movie written box by box, for the tests and the fuzz target's seed: a video track
//! (1000 units a second, 30 samples of 100, keyframes at samples 0, 10 and 20, three samples a
//! chunk, composition offsets, an edit list) and a sound track (8000 units a second, 60
//! samples of 400, 8 bytes each, three a chunk), their chunks interleaved by time. Each sample's
//! bytes name it: `V` or `A`, then its number repeated.

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

    fn trak(&self, id: u32, offsets: &[u32]) -> Vec<u8> {
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
        offsets
            .iter()
            .for_each(|o| stco.extend_from_slice(&o.to_be_bytes()));
        stbl.extend(boxed(b"stco", &stco));
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

/// The movie, `moov` before `mdat` (`fast_start`) or after it.
pub fn movie(fast_start: bool) -> Vec<u8> {
    let tracks = [
        Track {
            kind: b'V',
            timescale: 1000,
            delta: 100,
            sizes: (0..30).map(|i| 20 + i).collect(),
            per_chunk: 3,
            sync: Some(vec![1, 11, 21]),
            ctts: true,
        },
        Track {
            kind: b'A',
            timescale: 8000,
            delta: 400,
            sizes: vec![8; 60],
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
    let ftyp = boxed(b"ftyp", b"isom\0\0\x02\0isomiso2mp41");
    let moov = |offsets: &[Vec<u32>]| {
        let mut m = boxed(b"mvhd", &{
            let mut p = full(0, &[0, 0, 1000, 3000, 0x10000]);
            p.extend_from_slice(&[0u8; 80]);
            p
        });
        for (t, track) in tracks.iter().enumerate() {
            m.extend(track.trak(t as u32 + 1, &offsets[t]));
        }
        boxed(b"moov", &m)
    };
    let zero: Vec<Vec<u32>> = tracks.iter().map(|t| vec![0; t.chunks()]).collect();
    let moov_len = moov(&zero).len() as u32;
    let data_at = if fast_start {
        ftyp.len() as u32 + moov_len + 8
    } else {
        ftyp.len() as u32 + 8
    };
    let mut offsets = zero.clone();
    let mut data = Vec::new();
    for &(_, t, c) in &order {
        offsets[t][c] = data_at + data.len() as u32;
        let track = &tracks[t];
        let first = c * track.per_chunk;
        for s in first..(first + track.per_chunk).min(track.sizes.len()) {
            data.extend(track.sample(s));
        }
    }
    let mdat = boxed(b"mdat", &data);
    let mut out = ftyp;
    if fast_start {
        out.extend(moov(&offsets));
        out.extend(mdat);
    } else {
        out.extend(mdat);
        out.extend(moov(&offsets));
    }
    out
}
