//! `barrier bN cond|sock N [-cyclic]` / `barrier bN sync`, and 2.1's `sema rN sync N`: a
//! number of entities wait for each other. A non-cyclic barrier trips once; syncing it again
//! fails, as in varnishtest. Socket barriers (`sock`) are only different when VCL joins them
//! through vmod_vtc, which a file cannot use here (it is skipped), so both types are one.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::context::{Halt, Shared, Step, fail, lock};

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
    pub fn sync(&self, shared: &Shared, who: &str) -> Step {
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
            if Instant::now() >= shared.deadline {
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
    use crate::vtc::context::Flavour;
    use std::sync::Arc;

    #[test]
    fn three_parties_meet_and_a_one_shot_barrier_trips_once() {
        let shared = Arc::new(Shared::new(
            Flavour::Trunk,
            Duration::from_secs(5),
            std::env::temp_dir(),
        ));
        let b = Arc::new(Barrier::new("b1", 3, false));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (b, s) = (b.clone(), shared.clone());
                std::thread::spawn(move || b.sync(&s, "c"))
            })
            .collect();
        b.sync(&shared, "top").unwrap();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        assert!(b.sync(&shared, "top").is_err());
    }

    #[test]
    fn a_stop_releases_waiters() {
        let shared = Arc::new(Shared::new(
            Flavour::Trunk,
            Duration::from_secs(5),
            std::env::temp_dir(),
        ));
        let b = shared.barrier_or_insert("b1", || Barrier::new("b1", 2, true));
        let s2 = shared.clone();
        let t = std::thread::spawn(move || b.sync(&s2, "c1"));
        std::thread::sleep(Duration::from_millis(50));
        shared.halt("top", &Halt::Fail("x".into()));
        assert_eq!(t.join().unwrap(), Err(Halt::Stopped));
    }
}
