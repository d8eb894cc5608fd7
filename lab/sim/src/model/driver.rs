//! The event loop: arrivals (open or closed loop), the replay driver's spin
//! before each arrival and its wake-ups for answers, time's advance with its
//! integrals and samples, and the run's outcome.

use std::cmp::Reverse;

use tidepool_workload::metrics::{LatencyAccumulator, ThreadSample};
use tidepool_workload::TaskSpec;

use super::{ns, Sim, Task, DRIVER, DRIVER_ANSWER};
use crate::arrivals::Arrivals;
use crate::events::Event;
use crate::outcome::{LittlesLaw, SimOutcome};

impl Sim {
    /// Run every task of `tasks` to completion.
    pub(crate) fn run(
        mut self,
        tasks: impl Iterator<Item = TaskSpec>,
        workload: &str,
        clients: Option<usize>,
    ) -> SimOutcome {
        let mut arrivals = Arrivals::new(tasks, clients);
        self.closed = arrivals.is_closed();
        let mut taken = 0u64;
        // The next arrival: it moves only when a task is taken or answered.
        let mut ta = arrivals.next_at().unwrap_or(u64::MAX);
        // What a run keeps from start to end, in locals the loop need not
        // reload from `self` at every event.
        let (contended, preempting, closed) = (self.contended, self.preempt > 0, self.closed);
        loop {
            let tc = self.cpu.next_done().unwrap_or(u64::MAX);
            let te = self.calendar.next_at().unwrap_or(u64::MAX);
            let tp = self.control.as_ref().and_then(|c| c.at).unwrap_or(u64::MAX);
            let mut t = ta.min(tc).min(te).min(tp);
            // Threads waiting for a core, and the driver's next spin.
            let (mut tq, mut td) = (u64::MAX, u64::MAX);
            if contended {
                tq = self
                    .pending
                    .peek()
                    .map_or(u64::MAX, |Reverse(k)| (k >> 64) as u64);
                // As the replay: no spin while tasks queue past the idle
                // workers (the next one queues whenever it comes).
                let backlog = self.queue.len() > self.idle.len();
                if self.driver > 0 && ta != u64::MAX && self.driver_for != ta && !backlog {
                    td = ta.saturating_sub(self.driver).max(self.now);
                }
                td = td.min(self.driver_due);
                t = t.min(tq).min(td);
            }
            if t == u64::MAX {
                break;
            }
            self.advance(t);
            self.events_handled += 1;
            if tc == t {
                while let Some(w) = self.cpu.pop_done() {
                    if w == DRIVER {
                        self.driver_spinning = false;
                    } else if w == DRIVER_ANSWER {
                        self.driver_answering = false;
                    } else {
                        self.compute_done(w);
                    }
                }
            } else if te == t {
                if let Some((_, e)) = self.calendar.pop() {
                    self.handle(e);
                }
            } else if ta == t {
                let task = arrivals.take_with(|arrival, index, spec| Task {
                    index,
                    request_id: spec.request_id,
                    app_id: spec.app_id,
                    arrival,
                    cpu: ns(spec.cpu),
                    blocked: ns(spec.blocked),
                    steady: false,
                });
                if let Some(task) = task {
                    self.submit(task);
                    taken += 1;
                }
                ta = arrivals.next_at().unwrap_or(u64::MAX);
            } else if tq == t {
                if let Some(Reverse(k)) = self.pending.pop() {
                    self.proceed(Event::unpack(k as u64));
                }
            } else if td == t {
                if self.driver_due == t {
                    // The driver gets the core it landed on.
                    self.driver_due = u64::MAX;
                    self.spin_driver();
                } else {
                    // The driver wakes to spin to the arrival. It is a
                    // thread like the workers: with the slice's rule it
                    // lands on a core and waits there for the running part
                    // (at most a slice), then spins what is left (docs/notebook/sim.md; before, it shared the cores at
                    // once and stretched the parts it woke among).
                    self.driver_for = ta;
                    if self.driver_due == u64::MAX {
                        let wait = if self.preempt == 0 {
                            self.landing_wait()
                        } else {
                            0
                        };
                        if wait > 0 {
                            self.driver_due = t + wait;
                        } else {
                            self.spin_driver();
                        }
                    }
                }
            }
            if preempting {
                self.release_pending();
            }
            if closed {
                for i in self.answered.drain(..) {
                    arrivals.answered(i, self.now);
                }
                ta = arrivals.next_at().unwrap_or(u64::MAX);
            }
            self.poll_policy();
            if ta == u64::MAX && self.in_system == 0 {
                // Nothing left but timers of idle workers and policy ticks
                // (in a closed loop every answer has scheduled its next task).
                break;
            }
        }
        let end = self.last_finish.max(self.now);
        self.flush_samples(end + 1);
        self.finish(workload, taken)
    }

    /// Let time run to `t`: integrals, samples, the cores.
    #[inline(always)]
    pub(super) fn advance(&mut self, t: u64) {
        if t <= self.now {
            return;
        }
        let dt = u128::from(t - self.now);
        self.in_system_ns += dt * u128::from(self.in_system);
        if !self.pending.is_empty() {
            self.pending_ns += dt * self.pending.len() as u128;
        }
        self.queue_ns += dt * u128::from(self.waiting);
        if t > self.next_sample {
            self.flush_samples(t);
        }
        self.cpu.advance(t);
        self.now = t;
    }

    /// Record the samples due before `t` (the state has not changed since).
    #[inline]
    pub(super) fn flush_samples(&mut self, t: u64) {
        if t <= self.next_sample {
            return;
        }
        let k = (t - 1 - self.next_sample) / self.sample_interval + 1;
        let sample = ThreadSample {
            at_ns: self.next_sample,
            live: self.live_threads(),
            queued: self.queue.len(),
            target: (!self.per_request).then_some(self.sizes.target),
        };
        self.samples.push(&sample, k);
        self.samples
            .last_at(self.next_sample + (k - 1) * self.sample_interval);
        self.next_sample += k * self.sample_interval;
    }

    /// The driver's spin to the arrival it woke for, after a nap's CPU
    /// (none left if it got its core late: the arrival stays on time,
    /// as the model's driver is never late).
    #[inline]
    pub(super) fn spin_driver(&mut self) {
        if !self.driver_spinning {
            self.driver_spinning = true;
            let spin = self.driver_for.saturating_sub(self.now);
            self.cpu.start(DRIVER, spin + self.sleep_cpu);
        }
    }

    /// An answer in a closed loop: the replay's driver waits for answers
    /// in a timed channel receive, so one that comes while it sleeps wakes
    /// it, and it naps again: a nap's CPU (`sleep_cpu`) on the cores. One
    /// already awake (spinning, or taking an earlier answer) takes it in
    /// passing. Only with the driver modelled (`Costs::driver`).
    #[inline]
    pub(super) fn wake_driver(&mut self) {
        if self.driver > 0 && self.sleep_cpu > 0 && !self.driver_spinning && !self.driver_answering
        {
            self.driver_answering = true;
            self.cpu.start(DRIVER_ANSWER, self.sleep_cpu);
        }
    }

    #[inline(always)]
    pub(super) fn proceed(&mut self, e: Event) {
        match e {
            Event::Ready(w) => {
                if self.per_request {
                    let task = self.workers[w as usize].run.take().map(|r| r.task);
                    if let Some(task) = task {
                        if !self.start_task(w, task) {
                            self.leave(w);
                        }
                    }
                } else {
                    self.run_worker(w, false);
                }
            }
            Event::Woken(w) => {
                self.arriving -= 1;
                let last = self.arriving == 0;
                self.handed = true;
                self.run_worker(w, last);
                self.handed = false;
            }
            Event::Unblocked(w) => self.slice_done(w),
            Event::KeepAlive(w) => self.keep_alive(w),
        }
    }

    pub(super) fn finish(mut self, workload: &str, tasks: u64) -> SimOutcome {
        let first = self.first_arrival.unwrap_or(0);
        let span = self.last_finish.saturating_sub(first);
        let duration_s = span as f64 / 1e9;
        let samples = std::mem::take(&mut self.samples).finish();
        let zeros = |n: u64| {
            let mut a = LatencyAccumulator::default();
            a.record_n(0, n);
            a.summary()
        };
        self.wait.record_n(self.wait_run.0, self.wait_run.1);
        let wait = self.wait.summary();
        let turnaround = self.turnaround.summary();
        let cpu_s = self.cpu.busy_ns() / 1e9;
        let result = tidepool_workload::RunResult {
            executor: String::new(),
            workload: workload.to_string(),
            tasks: tasks as usize,
            submitted: self.submitted,
            accepted: self.accepted,
            rejected: self.submitted - self.accepted,
            completed: self.completed,
            cancelled: false,
            duration_s,
            throughput: if duration_s > 0.0 {
                self.completed as f64 / duration_s
            } else {
                0.0
            },
            mean_wait_us: wait.mean_us,
            p99_wait_us: wait.p99_us,
            mean_submit_blocked_us: 0.0,
            p99_submit_blocked_us: 0.0,
            mean_turnaround_us: turnaround.mean_us,
            p99_turnaround_us: turnaround.p99_us,
            submit_blocked: zeros(self.accepted),
            wait,
            processing: self.processing.summary(),
            turnaround,
            lateness: zeros(self.submitted),
            process_cpu_time_s: cpu_s,
            process_cpu_utilization: if duration_s > 0.0 {
                cpu_s / duration_s / self.cores as f64
            } else {
                0.0
            },
            cores: self.cores,
            load_average: None,
            threads_created: self.created - self.created_at_start,
            avg_threads: samples.avg_threads,
            max_threads: samples.max_threads,
            avg_queue: samples.avg_queue,
            max_queue: samples.max_queue,
            sample_interval_ms: self.sample_interval as f64 / 1e6,
            size_series: samples.size_series,
            decisions: self.decisions,
            records: self.records,
        };
        let mut steady = self.steady;
        if let Some((t0, threads0)) = self.steady_from {
            let (t1, threads1) = self.steady_to;
            steady.span_ns = t1.saturating_sub(t0);
            steady.threads_ns = threads1 - threads0;
        }
        SimOutcome {
            result,
            events: self.events_handled,
            littles_law: LittlesLaw {
                span_ns: span,
                accepted: self.accepted,
                in_system_ns: self.in_system_ns,
                turnaround_sum_ns: self.turnaround_sum,
                queue_ns: self.queue_ns,
                wait_sum_ns: self.wait_sum,
            },
            steady,
        }
    }
}
