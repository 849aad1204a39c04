//! The background writer thread: drains the per-worker queues, formats records, writes the
//! access log (file or stdout), reopens the file on request and feeds live subscribers.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak, mpsc};
use std::time::{Duration, Instant};

use super::wire::View;
use super::{Control, Record, Shards};

/// Records drained per queue before the writer looks at control messages again.
const BATCH: usize = 4096;

/// Longest time written records stay in the writer's buffer under steady load.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// A pass renders its lines into one buffer and hands it to the output whenever it holds this
/// much (and at the end of the pass): one `write_all` per ~64 KiB instead of one per line.
const WRITE_CHUNK: usize = 64 * 1024;

/// Where access-log lines go.
pub enum Output {
    Stdout(BufWriter<io::Stdout>),
    File {
        path: PathBuf,
        file: BufWriter<File>,
    },
}

/// Opens an access-log output: `"stdout"` or a file path (appended to, created if missing).
pub fn open_output(target: &str) -> io::Result<Output> {
    if target == "stdout" {
        return Ok(Output::Stdout(BufWriter::with_capacity(
            64 * 1024,
            io::stdout(),
        )));
    }
    let path = PathBuf::from(target);
    let file = open_file(&path)?;
    Ok(Output::File { path, file })
}

fn open_file(path: &Path) -> io::Result<BufWriter<File>> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    Ok(BufWriter::with_capacity(64 * 1024, file))
}

impl Output {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Output::Stdout(w) => w,
            Output::File { file, .. } => file,
        }
    }

    fn reopen(&mut self) -> io::Result<()> {
        if let Output::File { path, file } = self {
            file.flush()?;
            *file = open_file(path)?;
        }
        Ok(())
    }
}

/// The writer loop. Exits when the recorder is gone or on `Control::Close` (after draining).
pub(super) fn run(
    shards: Weak<Shards>,
    control: mpsc::Receiver<Control>,
    mut output: Option<Output>,
    pauses: RangeInclusive<Duration>,
) {
    let mut pause = *pauses.start();
    let mut lines = Vec::with_capacity(WRITE_CHUNK + 4096);
    // The record rankings are fed from (reused while nobody reads live records).
    let mut spare = None;
    let mut last_flush = Instant::now();
    let mut dirty = false;
    loop {
        let mut close = None;
        while let Ok(c) = control.try_recv() {
            match c {
                Control::Output(o) => {
                    if let Some(old) = output.as_mut() {
                        let _ = old.writer().flush();
                    }
                    output = o;
                }
                Control::Reopen => {
                    if let Some(out) = output.as_mut()
                        && let Err(e) = out.reopen()
                    {
                        tracing::error!(error = %e, "cannot reopen the access log");
                    }
                }
                Control::Close(ack) => close = Some(ack),
            }
        }
        let Some(shards) = shards.upgrade() else {
            flush(&mut output, None);
            return;
        };
        shards.expire_top_lease();
        let (drained, full) = drain(&shards, &mut output, &mut lines, &mut spare);
        dirty |= drained > 0;
        // Write out when things calm down, and at least every FLUSH_EVERY under load; the
        // buffer also writes itself out whenever it fills.
        if dirty && (drained == 0 || last_flush.elapsed() >= FLUSH_EVERY) {
            flush(&mut output, Some(&shards));
            dirty = false;
            last_flush = Instant::now();
        }
        if let Some(ack) = close {
            // Requests still finishing after shutdown began are drained by this final pass;
            // workers hand over their last batch as they go idle, which at shutdown is at once.
            std::thread::sleep(Duration::from_millis(10));
            drain(&shards, &mut output, &mut lines, &mut spare);
            flush(&mut output, Some(&shards));
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
    output: &mut Option<Output>,
    lines: &mut Vec<u8>,
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
            let mut record = spare.take().unwrap_or_else(|| Box::new(Record::blank()));
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
    lines.clear();
    if let Some(out) = output.as_mut() {
        for (view, format) in &views {
            if let Some(format) = format {
                format.render(view, lines);
                if lines.len() >= WRITE_CHUNK {
                    write_out(out, lines, shards);
                }
            }
        }
        if !lines.is_empty() {
            write_out(out, lines, shards);
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

/// Hands rendered lines to the output (buffered: small tails wait for the next flush).
fn write_out(out: &mut Output, lines: &mut Vec<u8>, shards: &Shards) {
    if out.writer().write_all(lines).is_err() {
        shards.counters.log_write_error.inc();
    }
    lines.clear();
}

fn flush(output: &mut Option<Output>, shards: Option<&Shards>) {
    if let Some(out) = output.as_mut()
        && out.writer().flush().is_err()
        && let Some(s) = shards
    {
        s.counters.log_write_error.inc();
    }
}
