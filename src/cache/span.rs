//! Durations in 8 bytes: an object's lifetimes (`Span`, `MaybeSpan`).

use std::time::Duration;

/// A duration in 8 bytes (whole milliseconds) instead of `Duration`'s 16: an object keeps five
/// of them (bench/RESULTS.md, "memory per object"). Saturates at ~584 million years.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span(u64);

impl Span {
    pub const ZERO: Span = Span(0);

    pub fn new(d: Duration) -> Span {
        Span(d.as_millis().min(u64::MAX as u128) as u64)
    }

    pub fn get(self) -> Duration {
        Duration::from_millis(self.0)
    }

    pub fn millis(self) -> u64 {
        self.0
    }
}

impl From<Duration> for Span {
    fn from(d: Duration) -> Span {
        Span::new(d)
    }
}

/// An optional [`Span`] in 8 bytes (`u64::MAX` is "none").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaybeSpan(u64);

impl MaybeSpan {
    pub const NONE: MaybeSpan = MaybeSpan(u64::MAX);

    pub fn new(d: Option<Duration>) -> MaybeSpan {
        match d {
            Some(d) => MaybeSpan(d.as_millis().min(u64::MAX as u128 - 1) as u64),
            None => MaybeSpan::NONE,
        }
    }

    pub fn get(self) -> Option<Duration> {
        (self.0 != u64::MAX).then(|| Duration::from_millis(self.0))
    }
}

impl From<Option<Duration>> for MaybeSpan {
    fn from(d: Option<Duration>) -> MaybeSpan {
        MaybeSpan::new(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_keep_milliseconds_and_none() {
        let d = Duration::from_millis(31_536_000_123);
        assert_eq!(Span::new(d).get(), d);
        assert_eq!(
            Span::new(Duration::from_micros(1_999)).get(),
            Duration::from_millis(1)
        );
        assert_eq!(Span::new(Duration::MAX).millis(), u64::MAX);
        assert_eq!(MaybeSpan::new(None).get(), None);
        assert_eq!(
            MaybeSpan::new(Some(Duration::ZERO)).get(),
            Some(Duration::ZERO)
        );
        // The largest value stays "some".
        assert!(MaybeSpan::new(Some(Duration::MAX)).get().is_some());
    }
}
