//! `barrier bN cond|sock N [-cyclic]` / `barrier bN sync`, and 2.1's `sema rN sync N`: a
//! number of entities wait for each other. A non-cyclic barrier trips once; syncing it again
//! fails, as in varnishtest. Socket barriers (`sock`) are only different when VCL joins them
//! through vmod_vtc, which a file cannot use here (it is skipped), so both types are one.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::halt::{Halt, Step, fail, lock};

/// What a waiting party asks of the running file (its shared state): the log, whether the
/// run is winding down, and its time limit.
pub trait Run {
    fn log(&self, who: &str, msg: String);
    fn stopped(&self) -> bool;
    fn deadline(&self) -> Instant;
}

pub struct Barrier {
    name: String,
    parties: usize,
    cyclic: bool,
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    waiting: usize,
    generation: u64,
    tripped: bool,
}

impl Barrier {
    pub fn new(name: &str, parties: usize, cyclic: bool) -> Barrier {
        Barrier {
            name: name.to_string(),
            parties,
            cyclic,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        }
    }

    /// Waits until `parties` entities have synced (or the run stops).
    pub fn sync(&self, shared: &(impl Run + ?Sized), who: &str) -> Step {
        let mut st = lock(&self.state);
        if st.tripped && !self.cyclic {
            return fail(format!("Barrier({}) use count exceeded", self.name));
        }
        st.waiting += 1;
        shared.log(
            who,
            format!(
                "Barrier({}) wait {} of {}",
                self.name, st.waiting, self.parties
            ),
        );
        if st.waiting >= self.parties {
            st.waiting = 0;
            st.generation += 1;
            st.tripped = true;
            self.cv.notify_all();
            return Ok(());
        }
        let generation = st.generation;
        loop {
            if shared.stopped() {
                return Err(Halt::Stopped);
            }
            if Instant::now() >= shared.deadline() {
                return fail(format!("Barrier({}) timeout", self.name));
            }
            let (next, _) = self
                .cv
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner());
            st = next;
            if st.generation != generation {
                return Ok(());
            }
        }
    }

    /// Wakes every waiter (the run stops; they see it and return).
    pub fn wake_all(&self) {
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A run with a stop flag and a time limit five seconds away.
    struct FakeRun {
        stop: AtomicBool,
        deadline: Instant,
    }

    impl FakeRun {
        fn new() -> Arc<FakeRun> {
            Arc::new(FakeRun {
                stop: AtomicBool::new(false),
                deadline: Instant::now() + Duration::from_secs(5),
            })
        }
    }

    impl Run for FakeRun {
        fn log(&self, _who: &str, _msg: String) {}
        fn stopped(&self) -> bool {
            self.stop.load(Ordering::Acquire)
        }
        fn deadline(&self) -> Instant {
            self.deadline
        }
    }

    #[test]
    fn three_parties_meet_and_a_one_shot_barrier_trips_once() {
        let run = FakeRun::new();
        let b = Arc::new(Barrier::new("b1", 3, false));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (b, r) = (b.clone(), run.clone());
                std::thread::spawn(move || b.sync(&*r, "c"))
            })
            .collect();
        b.sync(&*run, "top").unwrap();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        assert!(b.sync(&*run, "top").is_err());
    }

    #[test]
    fn a_stop_releases_waiters() {
        let run = FakeRun::new();
        let b = Arc::new(Barrier::new("b1", 2, true));
        let (b2, r2) = (b.clone(), run.clone());
        let t = std::thread::spawn(move || b2.sync(&*r2, "c1"));
        std::thread::sleep(Duration::from_millis(50));
        // As `Shared::halt` does: the flag, then every barrier woken.
        run.stop.store(true, Ordering::Release);
        b.wake_all();
        assert_eq!(t.join().unwrap(), Err(Halt::Stopped));
    }
}
