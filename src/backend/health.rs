//! Backend health: the sliding window of active probe results and passive marking after
//! consecutive connection failures. All state is atomics; the request path only reads it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::now_ms;
use crate::config::ProbeConfig;

/// Probe window and threshold (absent for backends without a probe).
#[derive(Clone, Copy, Debug)]
struct Window {
    size: u32,
    threshold: u32,
}

/// The health of one backend.
pub struct Health {
    window: Option<Window>,
    /// Probe results, newest in bit 0 (1 = passed).
    bits: AtomicU64,
    /// Probes recorded (saturates at 64), to show only real history.
    probes: AtomicU32,
    probe_healthy: AtomicBool,
    last_probe: Mutex<String>,
    passive_limit: u32,
    passive_cooldown: Duration,
    consecutive_failures: AtomicU32,
    sick_until_ms: AtomicU64,
    /// The operator's word (`Forced`), as Varnish's `backend.set_health`.
    forced: AtomicU8,
}

/// What the operator set a backend's health to (`POST /backends/NAME/health`, `shellac
/// backend NAME sick`, Varnish's `backend.set_health`): `Auto` leaves it to probes and
/// passive marking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forced {
    Auto = 0,
    Sick = 1,
    Healthy = 2,
}

impl Forced {
    /// `sick`, `healthy` or `auto` (Varnish's words; any case).
    pub fn parse(word: &str) -> Option<Forced> {
        match word.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Forced::Auto),
            "sick" => Some(Forced::Sick),
            "healthy" => Some(Forced::Healthy),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Forced::Auto => "auto",
            Forced::Sick => "sick",
            Forced::Healthy => "healthy",
        }
    }
}

/// A change of health worth logging.
#[derive(Debug, PartialEq, Eq)]
pub enum Transition {
    BecameHealthy,
    BecameSick,
}

impl Health {
    pub fn new(
        probe: Option<&ProbeConfig>,
        passive_limit: u32,
        passive_cooldown: Duration,
    ) -> Health {
        let window = probe.map(|p| Window {
            size: p.window,
            threshold: p.threshold,
        });
        let initial = probe.map(|p| p.initial()).unwrap_or(0);
        let bits = if initial >= 64 {
            u64::MAX
        } else {
            (1u64 << initial) - 1
        };
        let healthy = window.is_none_or(|w| initial >= w.threshold);
        Health {
            window,
            bits: AtomicU64::new(bits),
            probes: AtomicU32::new(initial),
            probe_healthy: AtomicBool::new(healthy),
            last_probe: Mutex::new(if window.is_some() {
                "no probe yet".into()
            } else {
                String::new()
            }),
            passive_limit,
            passive_cooldown,
            consecutive_failures: AtomicU32::new(0),
            sick_until_ms: AtomicU64::new(0),
            forced: AtomicU8::new(Forced::Auto as u8),
        }
    }

    /// What the operator set (`auto` unless `set_forced` said otherwise).
    pub fn forced(&self) -> Forced {
        match self.forced.load(Ordering::Relaxed) {
            1 => Forced::Sick,
            2 => Forced::Healthy,
            _ => Forced::Auto,
        }
    }

    /// Sets the operator's word: `Sick` and `Healthy` hold whatever probes say until `Auto`.
    pub fn set_forced(&self, f: Forced) {
        self.forced.store(f as u8, Ordering::Relaxed);
    }

    /// The operator's word if it is not `auto`; else healthy by probe (if any) and not marked
    /// sick by recent connection failures.
    pub fn is_healthy(&self) -> bool {
        match self.forced() {
            Forced::Sick => false,
            Forced::Healthy => true,
            Forced::Auto => {
                self.probe_healthy.load(Ordering::Relaxed)
                    && now_ms() >= self.sick_until_ms.load(Ordering::Relaxed)
            }
        }
    }

    /// Records one probe result; returns the transition it caused, if any.
    pub fn record_probe(&self, passed: bool, detail: String) -> Option<Transition> {
        let w = self.window?;
        let mask = if w.size >= 64 {
            u64::MAX
        } else {
            (1u64 << w.size) - 1
        };
        let bits = ((self.bits.load(Ordering::Relaxed) << 1) | passed as u64) & mask;
        self.bits.store(bits, Ordering::Relaxed);
        let _ = self
            .probes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some((n + 1).min(64))
            });
        if let Ok(mut last) = self.last_probe.lock() {
            *last = detail;
        }
        let healthy = bits.count_ones() >= w.threshold;
        let was = self.probe_healthy.swap(healthy, Ordering::Relaxed);
        match (was, healthy) {
            (false, true) => Some(Transition::BecameHealthy),
            (true, false) => Some(Transition::BecameSick),
            _ => None,
        }
    }

    /// A connection to the backend was established.
    pub fn connect_ok(&self) {
        if self.consecutive_failures.load(Ordering::Relaxed) != 0 {
            self.consecutive_failures.store(0, Ordering::Relaxed);
        }
    }

    /// A connection attempt failed; true if this marked the backend sick.
    pub fn connect_failed(&self) -> bool {
        if self.passive_limit == 0 {
            return false;
        }
        let n = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.passive_limit {
            self.consecutive_failures.store(0, Ordering::Relaxed);
            self.sick_until_ms.store(
                now_ms() + self.passive_cooldown.as_millis() as u64,
                Ordering::Relaxed,
            );
            return true;
        }
        false
    }

    /// Passed probes in the window, and the window size (None without a probe).
    pub fn probe_score(&self) -> Option<(u32, u32, u32)> {
        let w = self.window?;
        let mask = if w.size >= 64 {
            u64::MAX
        } else {
            (1u64 << w.size) - 1
        };
        Some((
            (self.bits.load(Ordering::Relaxed) & mask).count_ones(),
            w.size,
            w.threshold,
        ))
    }

    /// Probe history oldest → newest, `H` passed, `-` failed (like `varnishadm backend.list -p`).
    pub fn history(&self) -> String {
        let Some(w) = self.window else {
            return String::new();
        };
        let n = self.probes.load(Ordering::Relaxed).min(w.size);
        let bits = self.bits.load(Ordering::Relaxed);
        (0..n)
            .rev()
            .map(|i| if bits >> i & 1 == 1 { 'H' } else { '-' })
            .collect()
    }

    pub fn last_probe(&self) -> String {
        self.last_probe
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Milliseconds of passive sickness left (0 when not marked sick).
    pub fn passive_sick_ms(&self) -> u64 {
        self.sick_until_ms
            .load(Ordering::Relaxed)
            .saturating_sub(now_ms())
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_operators_word_holds_until_auto() {
        let h = Health::new(None, 0, Duration::from_secs(1));
        assert!(h.is_healthy());
        h.set_forced(Forced::Sick);
        assert!(!h.is_healthy());
        h.set_forced(Forced::Healthy);
        assert!(h.is_healthy());
        h.set_forced(Forced::Auto);
        assert!(h.is_healthy());
        assert_eq!(Forced::parse(" Sick\n"), Some(Forced::Sick));
        assert_eq!(Forced::parse("down"), None);
    }

    use super::*;
    use crate::config::units::Dur;

    fn probe(window: u32, threshold: u32, initial: Option<u32>) -> ProbeConfig {
        ProbeConfig {
            name: "p".into(),
            url: Some("/".into()),
            request: None,
            expected_status: 200,
            interval: Dur(Duration::from_secs(1)),
            timeout: Dur(Duration::from_secs(1)),
            window,
            threshold,
            initial,
        }
    }

    #[test]
    fn threshold_of_window() {
        let h = Health::new(Some(&probe(10, 8, Some(0))), 0, Duration::from_secs(1));
        assert!(!h.is_healthy());
        for i in 0..7 {
            assert_eq!(h.record_probe(true, "ok".into()), None, "probe {i}");
        }
        assert_eq!(
            h.record_probe(true, "ok".into()),
            Some(Transition::BecameHealthy)
        );
        assert_eq!(
            h.record_probe(false, "refused".into()),
            None,
            "8 of 9 still good"
        );
        assert_eq!(h.record_probe(false, "refused".into()), None, "8 of 10");
        assert_eq!(
            h.record_probe(false, "refused".into()),
            Some(Transition::BecameSick),
            "7 of 10"
        );
        assert_eq!(h.history(), "HHHHHHH---");
        assert_eq!(h.probe_score(), Some((7, 10, 8)));
    }

    #[test]
    fn initial_defaults_to_threshold_minus_one() {
        let h = Health::new(Some(&probe(8, 3, None)), 0, Duration::from_secs(1));
        assert!(!h.is_healthy());
        assert_eq!(
            h.record_probe(true, "ok".into()),
            Some(Transition::BecameHealthy)
        );
    }

    #[test]
    fn passive_failures_mark_sick() {
        let h = Health::new(None, 2, Duration::from_secs(60));
        assert!(h.is_healthy());
        assert!(!h.connect_failed());
        assert!(h.connect_failed());
        assert!(!h.is_healthy());
        assert!(h.passive_sick_ms() > 0);
    }
}
