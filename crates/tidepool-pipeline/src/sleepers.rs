//! Pooled mode's parked workers, one slot each, and whom a wake-up goes to
//! (`pooled.rs`, "Sleeping and waking"). Plain data under the run's lock:
//! the caller waits on and notifies the chosen worker's own condition
//! variable.

/// One worker's slot.
#[derive(Clone, Default)]
struct Slot {
    parked: bool,
    /// The wake-up owed to it: the group it was woken for.
    owed: Option<usize>,
    /// When it parked (a count), to wake the latest parked first.
    since: u64,
}

/// Every worker's slot, and which worker took each group's latest task.
#[derive(Default)]
pub(crate) struct Sleepers {
    slots: Vec<Slot>,
    ran_by: Vec<Option<usize>>,
    parks: u64,
}

impl Sleepers {
    pub(crate) fn new(workers: usize, groups: usize) -> Self {
        Sleepers {
            slots: vec![Slot::default(); workers],
            ran_by: vec![None; groups],
            parks: 0,
        }
    }

    /// Worker `w` took a task of group `g`.
    pub(crate) fn ran(&mut self, g: usize, w: usize) {
        self.ran_by[g] = Some(w);
    }

    /// Worker `w` is about to wait.
    pub(crate) fn park(&mut self, w: usize) {
        self.parks += 1;
        let s = &mut self.slots[w];
        debug_assert!(!s.parked && s.owed.is_none());
        s.parked = true;
        s.since = self.parks;
    }

    /// Worker `w` returned from its wait: the group it was woken for, or
    /// `None` for a return no one asked for (it owes nothing then).
    pub(crate) fn unpark(&mut self, w: usize) -> Option<usize> {
        let s = &mut self.slots[w];
        s.parked = false;
        s.owed.take()
    }

    /// Choose a parked worker with no wake-up owed, owe it one and return it
    /// (`None` if every parked worker already has one). `runnable(g)` is
    /// `None` if group `g` is not runnable, else whether it blocks. The
    /// wake-up goes, in this order: to the worker that ran the latest task
    /// of a runnable blocking group (downstream first), so that an I/O
    /// stage's role stays on one worker; of any runnable group; else to the
    /// latest parked worker, for the first runnable group in that order.
    pub(crate) fn wake(
        &mut self,
        groups: usize,
        runnable: impl Fn(usize) -> Option<bool>,
    ) -> Option<usize> {
        let free = |s: &Slot| s.parked && s.owed.is_none();
        let own = |blocking_only: bool| {
            (0..groups).rev().find_map(|g| {
                let blocks = runnable(g)?;
                let w = self.ran_by[g]?;
                (free(&self.slots[w]) && (blocks || !blocking_only)).then_some((w, g))
            })
        };
        let (w, g) = match own(true).or_else(|| own(false)) {
            Some(x) => x,
            None => {
                let w = (0..self.slots.len())
                    .filter(|&w| free(&self.slots[w]))
                    .max_by_key(|&w| self.slots[w].since)?;
                let first = |blocking_only: bool| {
                    (0..groups)
                        .rev()
                        .find(|&g| runnable(g).is_some_and(|b| b || !blocking_only))
                };
                (w, first(true).or_else(|| first(false))?)
            }
        };
        self.slots[w].owed = Some(g);
        Some(w)
    }

    /// (parked workers, of them with a wake-up owed): for the protocol's
    /// checks against the run's counts.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let parked = self.slots.iter().filter(|s| s.parked).count();
        let owed = self.slots.iter().filter(|s| s.owed.is_some()).count();
        (parked, owed)
    }
}

#[cfg(test)]
mod tests {
    use super::Sleepers;

    #[test]
    fn a_blocking_group_wakes_its_own_worker() {
        // Workers 1 (ran group 0, blocking) and 2 (ran group 1, computing)
        // park; both groups runnable: the blocking group's worker first,
        // though the computing group is further downstream.
        let mut s = Sleepers::new(3, 2);
        s.ran(0, 1);
        s.ran(1, 2);
        s.park(1);
        s.park(2);
        let kinds = |g: usize| Some(g == 0);
        assert_eq!(s.wake(2, kinds), Some(1));
        assert_eq!(s.wake(2, kinds), Some(2));
        assert_eq!(s.wake(2, kinds), None, "every parked worker is owed one");
        assert_eq!(s.counts(), (2, 2));
        assert_eq!(s.unpark(1), Some(0));
        assert_eq!(s.unpark(2), Some(1));
        assert_eq!(s.counts(), (0, 0));
    }

    #[test]
    fn without_its_own_worker_the_latest_parked_is_woken() {
        let mut s = Sleepers::new(3, 2);
        s.ran(0, 0); // worker 0 is running
        s.park(2);
        s.park(1);
        assert_eq!(s.wake(2, |g| (g == 0).then_some(true)), Some(1));
        assert_eq!(s.unpark(1), Some(0));
        // A return no one asked for owes nothing.
        assert_eq!(s.unpark(2), None);
        assert_eq!(s.counts(), (0, 0));
    }

    #[test]
    fn nothing_runnable_wakes_no_one() {
        let mut s = Sleepers::new(2, 2);
        s.park(1);
        assert_eq!(s.wake(2, |_| None), None);
        assert_eq!(s.counts(), (1, 0));
    }
}
