//! How an entity of a running VTC file ends a step: done, or halted (failed, skipped, or
//! stopped because another halted first); and the lock every shared value is read under.

use std::fmt;
use std::sync::{Mutex, MutexGuard};

/// Why an entity stopped before its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Halt {
    /// The test failed: what was expected and what happened.
    Fail(String),
    /// The file needs something out of scope (the reason); it is reported as skipped.
    Skip(String),
    /// Another entity halted the run first (or its time ran out); not a cause of its own.
    Stopped,
}

impl fmt::Display for Halt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Halt::Fail(m) => write!(f, "failed: {m}"),
            Halt::Skip(m) => write!(f, "skipped: {m}"),
            Halt::Stopped => f.write_str("stopped"),
        }
    }
}

/// A step of an entity: done, or halted.
pub type Step<T = ()> = Result<T, Halt>;

/// A failure with a formatted message.
pub fn fail<T>(msg: impl Into<String>) -> Step<T> {
    Err(Halt::Fail(msg.into()))
}

/// A skip with a formatted reason.
pub fn skip<T>(reason: impl Into<String>) -> Step<T> {
    Err(Halt::Skip(reason.into()))
}

/// Locks a mutex whatever a panicking holder left in it (every value here stays valid).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
