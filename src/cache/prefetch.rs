//! An object's own refresh-ahead window (VCL 2.0's `obj.prefetch`), two bytes in the
//! object's padding.

use std::time::Duration;

/// Refresh-ahead set for one object (VCL 2.0's `obj.prefetch`): how long before its expiry a
/// request refreshes it in the background, in whole seconds (up to 65,534: 18 h). Two bytes,
/// in the `Object`'s padding; [`Prefetch::CONFIGURED`] (most objects) defers to
/// `cache.refresh_ahead`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prefetch(u16);

impl Prefetch {
    /// As `cache.refresh_ahead` says.
    pub const CONFIGURED: Prefetch = Prefetch(0);
    /// Never refreshed ahead (`obj.prefetch = 0s`).
    pub const OFF: Prefetch = Prefetch(u16::MAX);

    /// Refreshed when requested within `window` of expiry (rounded up to a whole second).
    pub fn before(window: Duration) -> Prefetch {
        if window.is_zero() {
            return Prefetch::OFF;
        }
        let secs = window.as_secs() + u64::from(window.subsec_nanos() > 0);
        Prefetch(secs.clamp(1, u64::from(u16::MAX - 1)) as u16)
    }

    /// The raw value, as stored by the disk and shared tiers.
    pub fn to_bits(self) -> u16 {
        self.0
    }

    pub fn from_bits(bits: u16) -> Prefetch {
        Prefetch(bits)
    }

    /// The window before expiry in which a request refreshes the object: this object's own,
    /// else what `configured` (the setting's window for its TTL) says.
    pub fn window(self, configured: impl FnOnce() -> Option<Duration>) -> Option<Duration> {
        match self {
            Prefetch::CONFIGURED => configured(),
            Prefetch::OFF => None,
            Prefetch(secs) => Some(Duration::from_secs(u64::from(secs))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VCL 2.0's `obj.prefetch`: an object's own window wins over the setting, "off" turns it
    /// off whatever the setting says, and most objects follow the setting.
    #[test]
    fn an_objects_own_prefetch_window() {
        let secs = Duration::from_secs;
        let configured = || Some(Duration::from_secs(5));
        assert_eq!(Prefetch::CONFIGURED.window(configured), Some(secs(5)));
        assert_eq!(Prefetch::OFF.window(configured), None);
        assert_eq!(
            Prefetch::before(secs(30)).window(configured),
            Some(secs(30))
        );
        assert_eq!(
            Prefetch::before(Duration::from_millis(1500)).window(|| None),
            Some(secs(2))
        );
        assert_eq!(Prefetch::before(Duration::ZERO), Prefetch::OFF);
        assert_eq!(
            Prefetch::before(secs(1 << 20)).window(|| None),
            Some(secs(65_534))
        );
    }
}
