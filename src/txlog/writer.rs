//! The background writer thread: drains the per-worker queues, formats records, writes the
//! access log (file or stdout) and the sites' own logs (`[[site]] access_log`, opened when
//! their first line comes), reopens the files on request and feeds live subscribers.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak, mpsc};
use std::time::{Duration, Instant};

use super::record::Record;
use super::shards::Shards;
use super::wire::{self, View};

/// Records drained per queue before the writer looks at control messages again.
const BATCH: usize = 4096;

/// Longest time written records stay in the writer's buffer under steady load.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Rendered lines wait in the output's own buffer and go to the file in one `write` once it
/// holds this much (or at a flush): no `BufWriter` in between, whose copy of every line cost a
/// second pass over the bytes and another 64 KiB of cache next to the request path's.
const WRITE_CHUNK: usize = 64 * 1024;

/// Control messages to the writer thread (never sent from the request path).
pub(super) enum Control {
    Output(Option<LogOutput>),
    Reopen,
    Close(mpsc::Sender<()>),
}

/// Where access-log lines go: the file or stdout, and the lines rendered but not written yet.
pub struct LogOutput {
    sink: Device,
    pending: Vec<u8>,
}

enum Device {
    Stdout(io::Stdout),
    File { path: PathBuf, file: File },
}

/// Opens an access-log output: `"stdout"` or a file path (appended to, created if missing).
pub fn open_output(target: &str) -> io::Result<LogOutput> {
    let sink = if target == "stdout" {
        Device::Stdout(io::stdout())
    } else {
        let path = PathBuf::from(target);
        let file = open_file(&path)?;
        Device::File { path, file }
    };
    Ok(LogOutput {
        sink,
        pending: Vec::with_capacity(WRITE_CHUNK + 4096),
    })
}

fn open_file(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Drop for LogOutput {
    /// An output replaced or dropped still writes what it holds.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl LogOutput {
    /// Writes out the pending lines once they fill a chunk.
    fn maybe_write(&mut self) -> io::Result<()> {
        if self.pending.len() >= WRITE_CHUNK {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Writes out every pending line. The buffer is emptied even on an error: a disk that
    /// refuses writes loses lines (counted in `log_write_error`), never grows the buffer.
    fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let result = match &mut self.sink {
            Device::Stdout(out) => out.write_all(&self.pending).and_then(|()| out.flush()),
            Device::File { file, .. } => file.write_all(&self.pending),
        };
        self.pending.clear();
        result
    }

    fn reopen(&mut self) -> io::Result<()> {
        self.flush()?;
        if let Device::File { path, file } = &mut self.sink {
            *file = open_file(path)?;
        }
        Ok(())
    }
}

/// The writer loop. Exits when the recorder is gone or on `Control::Close` (after draining).
pub(super) fn run(
    shards: Weak<Shards>,
    control: mpsc::Receiver<Control>,
    mut output: Option<LogOutput>,
    pauses: RangeInclusive<Duration>,
) {
    let mut pause = *pauses.start();
    // The record rankings are fed from (reused while nobody reads live records).
    let mut spare = None;
    let mut last_flush = Instant::now();
    let mut dirty = false;
    // The sites' own logs, by path: opened by `drain` when their first line comes, closed
    // (flushed) on `Reopen` and opened again by the next line.
    let mut sites = SiteOutputs::default();
    loop {
        let mut close = None;
        while let Ok(c) = control.try_recv() {
            match c {
                Control::Output(o) => {
                    if let Some(old) = output.as_mut() {
                        let _ = old.flush();
                    }
                    output = o;
                }
                Control::Reopen => {
                    if let Some(out) = output.as_mut()
                        && let Err(e) = out.reopen()
                    {
                        tracing::error!(error = %e, "cannot reopen the access log");
                    }
                    sites.close();
                }
                Control::Close(ack) => close = Some(ack),
            }
        }
        let Some(shards) = shards.upgrade() else {
            flush(&mut output, None);
            sites.flush(None);
            return;
        };
        shards.expire_top_lease();
        let (drained, full) = drain(&shards, &mut output, &mut sites, &mut spare);
        dirty |= drained > 0;
        // Write out when things calm down, and at least every FLUSH_EVERY under load; the
        // buffer also writes itself out whenever it fills.
        if dirty && (drained == 0 || last_flush.elapsed() >= FLUSH_EVERY) {
            flush(&mut output, Some(&shards));
            sites.flush(Some(&shards));
            dirty = false;
            last_flush = Instant::now();
        }
        if let Some(ack) = close {
            // Requests still finishing after shutdown began are drained by this final pass;
            // workers hand over their last batch as they go idle, which at shutdown is at once.
            std::thread::sleep(Duration::from_millis(10));
            drain(&shards, &mut output, &mut sites, &mut spare);
            flush(&mut output, Some(&shards));
            sites.flush(Some(&shards));
            let _ = ack.send(());
            return;
        }
        drop(shards);
        // A short pause while records flow, a doubling one when idle (an idle proxy's writer
        // stays asleep); a queue that was drained only up to BATCH may hold more, so go on at
        // once.
        if !full {
            pause = if drained > 0 {
                *pauses.start()
            } else {
                (pause * 2).min(*pauses.end())
            };
            std::thread::park_timeout(pause);
        }
    }
}

/// One pass over every queue. Records of one pass are written in order of completion, so
/// lines from different workers interleave as they happened (up to one pass apart).
/// Returns (records drained, whether a queue had BATCH or more).
fn drain(
    shards: &Arc<Shards>,
    output: &mut Option<LogOutput>,
    sites: &mut SiteOutputs,
    spare: &mut Option<Box<Record>>,
) -> (usize, bool) {
    let mut chunks = Vec::new();
    let mut full = false;
    let mut sources = 0;
    for (shard, queue) in shards.queues.iter().enumerate() {
        let mut records = 0;
        while let Some(chunk) = queue.pop() {
            records += chunk.records as usize;
            chunks.push((shard, chunk));
            if records >= BATCH {
                full = true;
                break;
            }
        }
        sources += usize::from(records > 0);
    }
    // Records are rendered in place from their chunks (no copy into records).
    let mut views = Vec::with_capacity(chunks.iter().map(|(_, c)| c.records as usize).sum());
    for (_, chunk) in &chunks {
        let mut input = &chunk.bytes[..];
        for _ in 0..chunk.records {
            match View::parse(&mut input) {
                Some(view) => views.push((view, &chunk.format)),
                None => {
                    tracing::error!("access log: a record chunk did not decode; rest skipped");
                    break;
                }
            }
        }
    }
    // Each queue is in completion order already (its worker encodes records as they finish):
    // only records from several workers need ordering.
    if sources > 1 {
        views.sort_by_key(|(v, _)| v.ended());
    }
    let top = shards.top_wanted();
    let live = shards.live.receiver_count() > 0;
    if (top || live) && !views.is_empty() {
        let mut top = if top { shards.top.lock().ok() } else { None };
        for (view, _) in &views {
            let mut record = spare.take().unwrap_or_else(|| Box::new(wire::blank()));
            view.fill(&mut record);
            if let Some(top) = top.as_mut() {
                top.add(&record);
            }
            if live {
                let _ = shards.live.send(Arc::from(record));
            } else {
                *spare = Some(record);
            }
        }
    }
    let n = views.len();
    for (view, format) in &views {
        let Some(format) = format else {
            continue;
        };
        let out = match format.output() {
            None => output.as_mut(),
            Some(path) => sites.get(path),
        };
        let Some(out) = out else {
            if format.output().is_some() {
                shards.counters.log_write_error.inc();
            }
            continue;
        };
        format.render(view, &mut out.pending);
        if out.maybe_write().is_err() {
            shards.counters.log_write_error.inc();
        }
    }
    drop(views);
    for (shard, chunk) in chunks {
        let mut buffer = chunk.bytes;
        buffer.clear();
        let _ = shards.empties[shard].push(buffer);
    }
    (n, full)
}

/// The sites' own outputs, by path; a path that could not be opened is tried again after
/// the next `Reopen` (its lines are lost meanwhile, counted in `log_write_error`).
#[derive(Default)]
struct SiteOutputs {
    open: HashMap<Arc<str>, Option<LogOutput>>,
}

impl SiteOutputs {
    fn get(&mut self, path: &Arc<str>) -> Option<&mut LogOutput> {
        self.open
            .entry(path.clone())
            .or_insert_with(|| match open_output(path) {
                Ok(out) => Some(out),
                Err(e) => {
                    tracing::error!(path = %path, error = %e, "cannot open a site's access log");
                    None
                }
            })
            .as_mut()
    }

    /// Flushes and closes every one (they open again with their next line).
    fn close(&mut self) {
        self.open.clear();
    }

    fn flush(&mut self, shards: Option<&Shards>) {
        for out in self.open.values_mut().flatten() {
            if out.flush().is_err()
                && let Some(s) = shards
            {
                s.counters.log_write_error.inc();
            }
        }
    }
}

fn flush(output: &mut Option<LogOutput>, shards: Option<&Shards>) {
    if let Some(out) = output.as_mut()
        && out.flush().is_err()
        && let Some(s) = shards
    {
        s.counters.log_write_error.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_reach_the_file_at_a_full_chunk_a_flush_or_a_drop() {
        let path = std::env::temp_dir().join(format!("shellac-writer-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let on_disk = || std::fs::metadata(&path).map_or(0, |m| m.len() as usize);
        let mut out = open_output(path.to_str().unwrap()).unwrap();
        out.pending.extend_from_slice(b"one\n");
        out.maybe_write().unwrap();
        assert_eq!(on_disk(), 0, "a short tail waits for the flush");
        out.flush().unwrap();
        assert_eq!(on_disk(), 4);
        out.pending.resize(WRITE_CHUNK, b'x');
        out.maybe_write().unwrap();
        assert_eq!(on_disk(), 4 + WRITE_CHUNK, "a full chunk goes out at once");
        assert!(out.pending.is_empty());
        out.pending.extend_from_slice(b"last\n");
        drop(out);
        assert_eq!(
            on_disk(),
            4 + WRITE_CHUNK + 5,
            "a dropped output writes what it holds"
        );
        let _ = std::fs::remove_file(&path);
    }
}
