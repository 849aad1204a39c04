//! Writes a big MP4 for `bench/seek.sh`: the sample movie of `shellac::mp4::sample` (a video
//! track with keyframes at 0, 1 and 2 s and an audio track, 3 s; fast start: `ftyp`, `moov`,
//! then the `mdat`), its samples `SCALE` times their small size, after as many zero bytes at
//! the start of the `mdat` as make the file `SIZE` bytes — written as a hole, so a 2 GiB file
//! takes the disk space of its samples only. Prints the file's length.
//!
//! Run: `cargo run --example seek_movie -- PATH SIZE SCALE`.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};

use shellac::mp4::sample::{Options, movie_with};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = || {
        eprintln!("usage: seek_movie PATH SIZE SCALE");
        std::process::exit(2);
    };
    let [_, path, size, scale] = args.as_slice() else {
        usage();
        return Ok(());
    };
    let (Ok(size), Ok(scale)) = (size.parse::<u64>(), scale.parse::<u32>()) else {
        usage();
        return Ok(());
    };
    let options = |lead| Options {
        fast_start: true,
        co64: false,
        scale,
        lead,
    };
    // Offsets past 4 GiB would need co64 and a 64-bit mdat header: not this tool's job.
    let small = movie_with(options(0)).len();
    let lead = size.saturating_sub(small).min((4 << 30) - small - 1);
    let movie = movie_with(options(lead));
    let mut file = File::create(path)?;
    file.write_all(&movie.head)?;
    file.seek(SeekFrom::Current(
        i64::try_from(movie.lead).unwrap_or(i64::MAX),
    ))?;
    file.write_all(&movie.data)?;
    file.write_all(&movie.tail)?;
    println!("{}", movie.len());
    Ok(())
}
