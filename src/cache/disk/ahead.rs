//! The disk index rebuilt ahead of the rest of start-up. `shellac serve` calls [`open_ahead`]
//! as soon as its configuration is checked (and a process it replaces has released the data
//! file): a thread opens the file and recovers the index — after a reboot mostly waiting for
//! the device — while the main thread builds everything else, itself waiting for its own code
//! to be paged in. [`DiskStorage::open`](super::DiskStorage::open) then takes that result
//! (waiting for the thread if it is not done) instead of opening the file itself. Nothing is
//! served before the recovery is complete, so what a lookup finds is what it found before.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::engine::{Engine, Recovered};
use crate::config::DiskConfig;
use crate::stats::Counters;

/// A recovery under way: for which file and layout, what it counted, its thread.
struct Ahead {
    path: PathBuf,
    size: u64,
    region_size: u64,
    counters: Arc<Counters>,
    thread: JoinHandle<io::Result<(Engine, Recovered)>>,
}

/// Recoveries started and not taken yet, by data file (one, in `serve`).
static AHEAD: Mutex<Vec<Ahead>> = Mutex::new(Vec::new());

fn ahead() -> MutexGuard<'static, Vec<Ahead>> {
    AHEAD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes the recovery started for the data file at `path`, if any.
fn take(path: &std::path::Path) -> Option<Ahead> {
    let mut all = ahead();
    let at = all.iter().position(|a| a.path == path)?;
    Some(all.swap_remove(at))
}

/// Starts opening the data file of `config` and recovering its index on a thread of its own.
/// If no thread can be started, nothing happens: the storage opens the file itself.
pub fn open_ahead(config: &DiskConfig) {
    let (path, size, region_size) = (config.path.clone(), config.size.0, config.region_size.0);
    // A second start for the same file first waits for the first (which closes its file).
    if let Some(earlier) = take(&path) {
        let _ = earlier.thread.join();
    }
    let counters = Arc::new(Counters::default());
    let spawned = {
        let (path, counters) = (path.clone(), counters.clone());
        std::thread::Builder::new()
            .name("shellac-disk-recover".into())
            .spawn(move || Engine::open(&path, size, region_size, counters))
    };
    if let Ok(thread) = spawned {
        ahead().push(Ahead {
            path,
            size,
            region_size,
            counters,
            thread,
        });
    }
}

/// The engine of `config`'s data file and what recovery found, counted in `counters`: the
/// result of [`open_ahead`] for the same file and layout if one was started (waited for),
/// else opened now. Also returns how long start-up waited for it.
pub(super) fn open(
    config: &DiskConfig,
    counters: &Arc<Counters>,
) -> io::Result<(Engine, Recovered, Duration)> {
    let started = Instant::now();
    if let Some(a) = take(&config.path) {
        let same = a.size == config.size.0 && a.region_size == config.region_size.0;
        let result = a.thread.join();
        if same {
            counters.add_all(&a.counters);
            let (mut engine, recovered) = result
                .map_err(|_| io::Error::other("the disk index recovery thread panicked"))??;
            engine.counters = counters.clone();
            return Ok((engine, recovered, started.elapsed()));
        }
        // Started with another layout (not what `serve` does): that engine is dropped (its
        // file closed and unlocked) and the file opened again with this one, as a restart
        // with a changed layout would.
    }
    let (engine, recovered) = Engine::open(
        &config.path,
        config.size.0,
        config.region_size.0,
        counters.clone(),
    )?;
    Ok((engine, recovered, started.elapsed()))
}
