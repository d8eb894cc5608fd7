//! When tasks arrive: an open loop (a task's start delay is the gap since
//! the previous arrival) or a closed loop of clients, as the real replay
//! drives them (`tidepool_workload::replay`, [`Trace::clients`]).
//!
//! In a closed loop of `n` clients, task `i` belongs to client `i mod n`
//! and its start delay is a *think time*: the client's first task arrives
//! its think time after the start, every later one its think time after the
//! answer to the client's previous task (`i − n`: completed, or rejected).
//! Tasks due at the same instant arrive in index order (the replay's
//! order). The stream is read in order, so tasks of clients that ran ahead
//! wait in a buffer: memory grows with the clients and how far apart they
//! drift, not with the stream.
//!
//! [`Trace::clients`]: tidepool_workload::Trace::clients

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use tidepool_workload::TaskSpec;

/// The arrival process of a run.
pub(crate) enum Arrivals<I> {
    /// Start delays are gaps between arrivals.
    Open {
        tasks: I,
        next: Option<(u64, TaskSpec)>,
        index: u64,
    },
    /// Start delays are think times of `clients` clients.
    Closed(Closed<I>),
}

pub(crate) struct Closed<I> {
    tasks: I,
    clients: u64,
    /// Tasks read from the stream and not arrived yet; `buffer[0]` is task
    /// `first`.
    buffer: VecDeque<Option<TaskSpec>>,
    first: u64,
    /// (arrival, index) of the tasks whose time is known.
    due: BinaryHeap<Reverse<(u64, u64)>>,
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<I: Iterator<Item = TaskSpec>> Arrivals<I> {
    /// `tasks` as an open loop, or as a closed loop of `clients` clients.
    pub(crate) fn new(mut tasks: I, clients: Option<usize>) -> Arrivals<I> {
        match clients {
            None | Some(0) => {
                let next = tasks.next().map(|t| (ns(t.start_delay), t));
                Arrivals::Open {
                    tasks,
                    next,
                    index: 0,
                }
            }
            Some(n) => {
                let mut c = Closed {
                    tasks,
                    clients: n as u64,
                    buffer: VecDeque::new(),
                    first: 0,
                    due: BinaryHeap::new(),
                };
                // Each client's first task: its think time from the start.
                for i in 0..n as u64 {
                    match c.load(i) {
                        Some(think) => c.due.push(Reverse((think, i))),
                        None => break,
                    }
                }
                Arrivals::Closed(c)
            }
        }
    }

    /// When the next task arrives, if one is known.
    #[inline]
    pub(crate) fn next_at(&self) -> Option<u64> {
        match self {
            Arrivals::Open { next, .. } => next.as_ref().map(|(at, _)| *at),
            Arrivals::Closed(c) => c.due.peek().map(|Reverse((at, _))| *at),
        }
    }

    /// Take the next task: (arrival, index in the stream, task).
    #[cfg(test)]
    pub(crate) fn take(&mut self) -> Option<(u64, u64, TaskSpec)> {
        self.take_with(|at, i, spec| (at, i, *spec))
    }

    /// Take the next task as `f(arrival, index in the stream, task)`: `f`
    /// reads the task where it is (a copy of its 64 bytes in and out of the
    /// buffer was ~3% of a compute-only run).
    #[inline(always)]
    pub(crate) fn take_with<T>(&mut self, f: impl FnOnce(u64, u64, &TaskSpec) -> T) -> Option<T> {
        match self {
            Arrivals::Open { tasks, next, index } => {
                let (at, spec) = next.as_ref()?;
                let at = *at;
                let i = *index;
                let out = f(at, i, spec);
                *index += 1;
                *next = tasks
                    .next()
                    .map(|t| (at.saturating_add(ns(t.start_delay)), t));
                Some(out)
            }
            Arrivals::Closed(c) => {
                let Reverse((at, i)) = c.due.pop()?;
                let spec = c.buffer.get_mut((i - c.first) as usize)?.take()?;
                while c.buffer.front().is_some_and(Option::is_none) {
                    c.buffer.pop_front();
                    c.first += 1;
                }
                Some(f(at, i, &spec))
            }
        }
    }

    /// Task `i` was answered (completed or rejected) at `now`: in a closed
    /// loop its client's next task arrives a think time later.
    #[inline]
    pub(crate) fn answered(&mut self, i: u64, now: u64) {
        if let Arrivals::Closed(c) = self {
            let j = i + c.clients;
            if let Some(think) = c.load(j) {
                c.due.push(Reverse((now.saturating_add(think), j)));
            }
        }
    }

    /// Whether an arrival must wait for answers first (a closed loop).
    pub(crate) fn is_closed(&self) -> bool {
        matches!(self, Arrivals::Closed(_))
    }

    /// No task will arrive unless an answer schedules one (the event loop
    /// keeps the next arrival's time instead).
    #[cfg(test)]
    pub(crate) fn none_due(&self) -> bool {
        self.next_at().is_none()
    }
}

impl<I: Iterator<Item = TaskSpec>> Closed<I> {
    /// Read the stream up to task `j`; its think time, if the stream has it.
    fn load(&mut self, j: u64) -> Option<u64> {
        while self.first + self.buffer.len() as u64 <= j {
            let t = self.tasks.next()?;
            self.buffer.push_back(Some(t));
        }
        let t = self.buffer.get((j - self.first) as usize)?.as_ref()?;
        Some(ns(t.start_delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn task(think_us: u64) -> TaskSpec {
        TaskSpec {
            request_id: 0,
            app_id: 1,
            start_delay: Duration::from_micros(think_us),
            cpu: Duration::from_micros(1),
            blocked: Duration::ZERO,
        }
    }

    #[test]
    fn open_loop_delays_are_gaps() {
        let mut a = Arrivals::new(vec![task(5), task(3), task(0)].into_iter(), None);
        let mut got = Vec::new();
        while let Some((at, i, _)) = a.take() {
            got.push((at, i));
        }
        assert_eq!(got, vec![(5_000, 0), (8_000, 1), (8_000, 2)]);
    }

    #[test]
    fn a_client_sends_its_next_task_a_think_time_after_the_answer() {
        // Two clients; think times 10, 20 | 1, 2 | 5 µs.
        let tasks = vec![task(10), task(20), task(1), task(2), task(5)];
        let mut a = Arrivals::new(tasks.into_iter(), Some(2));
        assert_eq!(a.take().map(|(at, i, _)| (at, i)), Some((10_000, 0)));
        assert_eq!(a.take().map(|(at, i, _)| (at, i)), Some((20_000, 1)));
        // Nothing more until an answer.
        assert!(a.none_due());
        // Client 1's task answered first, at 25 µs: task 3 at 27 µs.
        a.answered(1, 25_000);
        assert_eq!(a.next_at(), Some(27_000));
        // Client 0's, at 30 µs: task 2 at 31 µs.
        a.answered(0, 30_000);
        assert_eq!(a.take().map(|(at, i, _)| (at, i)), Some((27_000, 3)));
        assert_eq!(a.take().map(|(at, i, _)| (at, i)), Some((31_000, 2)));
        a.answered(3, 40_000); // client 1 has no task 5
        assert!(a.none_due());
        a.answered(2, 41_000);
        assert_eq!(a.take().map(|(at, i, _)| (at, i)), Some((46_000, 4)));
        a.answered(4, 50_000);
        assert!(a.take().is_none());
    }
}
