//! The modelled pool, through the same control rules as the real one:
//! submit, wake-ups, on-demand spawns, parking and keep-alive, retirement,
//! completion, and the policy's calls and their decisions.

use std::time::Duration;

use tidepool::control::{apply, holds_wake_up, observation, wants_worker, Events, Next};
use tidepool::policy::Trigger;
use tidepool::PoolStats;
use tidepool_workload::body::TaskBody;
use tidepool_workload::metrics::TaskRecord;
use tidepool_workload::DecisionEntry;

use super::{ns, Running, Sim, State, Task, Worker};
use crate::events::Event;

impl Sim {
    /// A task arrives.
    #[inline]
    pub(super) fn submit(&mut self, mut task: Task) {
        self.submitted += 1;
        self.first_arrival.get_or_insert(task.arrival);
        // The measured window runs from the arrival of task `warmup` to that
        // of task `steady_end`, in time: in an open loop that is the tasks
        // `warmup..steady_end`; in a closed loop, clients drift apart and a
        // task's index no longer says when it arrives.
        if task.index == self.warmup {
            self.steady_from = Some((self.now, self.threads_ns()));
            self.in_steady = true;
        }
        if task.index == self.steady_end {
            self.in_steady = false;
        }
        let steady = self.in_steady;
        task.steady = steady;
        if steady {
            self.steady_to = (self.now, self.threads_ns());
        }
        if steady {
            self.steady.submitted += 1;
        }
        if let Some(c) = &mut self.control {
            c.window.submitted += 1;
        }
        if self.per_request {
            self.accept();
            self.sync_threads();
            self.threads += 1;
            self.spawn_worker(Some(task));
            return;
        }
        if self.wake == 0 && (!self.core_wait || self.cpu.running() < self.cores) {
            // An idle worker takes the task at once: it never waits in the
            // queue (so a queue with no room still admits it).
            if let Some(w) = self.idle.pop_back() {
                self.accept();
                self.handed = true;
                if !self.start_task(w, task) {
                    self.run_worker(w, false);
                }
                self.handed = false;
                return;
            }
        }
        if self.capacity.is_some_and(|cap| self.queue.len() >= cap) {
            if steady {
                self.steady.rejected += 1;
            }
            if let Some(c) = &mut self.control {
                c.window.submitted -= 1;
                c.window.rejected += 1;
            }
            if self.closed {
                self.answered.push(task.index);
            }
            return;
        }
        self.accept();
        self.queue.push_back(task);
        if !self.idle.is_empty() {
            self.notify_work();
        } else if wants_worker(
            self.sizes.live_threads,
            || self.limits.grow_on_demand,
            || 0,
            || self.queue.len(),
        ) {
            match self
                .sizes
                .reserve(self.limits.effective_spawn_limit().max(1))
            {
                Some(s) => {
                    self.set_sizes(s.raise_target_to_live().unwrap_or(s));
                    self.spawn_worker(None);
                    if let Some(c) = &mut self.control {
                        if let Some(s) = &c.scheduler {
                            s.starved(&mut c.events);
                        }
                    }
                }
                None => {
                    if let Some(c) = &mut self.control {
                        if let Some(s) = &c.scheduler {
                            s.at_max(&mut c.events);
                        }
                    }
                }
            }
        }
    }

    #[inline]
    pub(super) fn accept(&mut self) {
        self.accepted += 1;
        self.in_system += 1;
        self.waiting += 1;
    }

    /// Start a thread (its slot is reserved); it takes work after the spawn cost.
    #[inline]
    pub(super) fn spawn_worker(&mut self, own: Option<Task>) {
        let worker = Worker {
            state: State::Starting,
            run: own.map(|task| Running::new(task, 0, 1, 0)),
            deadline: 0,
            timer: u64::MAX,
        };
        let w = match self.free.pop() {
            Some(w) => {
                self.workers[w as usize] = worker;
                w
            }
            None => {
                self.workers.push(worker);
                (self.workers.len() - 1) as u32
            }
        };
        self.created += 1;
        if let Some(c) = &mut self.control {
            c.window.threads_created += 1;
        }
        self.calendar.push(self.now + self.spawn, Event::Ready(w));
    }

    /// Work was queued and workers are parked: wake the top of the idle
    /// stack, unless a wake-up younger than [`ARRIVAL_GRACE`](tidepool::control::ARRIVAL_GRACE) is still on
    /// its way (the pool's rule, [`holds_wake_up`]: one wake-up in flight).
    #[inline]
    pub(super) fn notify_work(&mut self) {
        let since = || Duration::from_nanos(self.now - self.arriving_since);
        if holds_wake_up(self.arriving as usize, since) {
            return;
        }
        self.wake_one();
    }

    /// Wake the most recently parked worker, if any (`Sleepers::wake_one`):
    /// it is on its way until its `Woken` event.
    #[inline]
    pub(super) fn wake_one(&mut self) -> bool {
        let Some(w) = self.idle.pop_back() else {
            return false;
        };
        self.arriving += 1;
        self.arriving_since = self.now;
        self.workers[w as usize].state = State::Waking;
        self.calendar.push(self.now + self.wake, Event::Woken(w));
        true
    }

    /// A pool worker between tasks: retire as surplus, take a task, or park.
    /// `hand_on`: it was the last woken worker to arrive, so once it has a
    /// task it wakes the next if work is left (`Sleepers::hand_on`).
    #[inline]
    pub(super) fn run_worker(&mut self, w: u32, mut hand_on: bool) {
        loop {
            if let Some(s) = self.sizes.release_surplus() {
                self.set_sizes(s);
                self.retire(w, false);
                return;
            }
            match self.queue.pop_front() {
                Some(task) => {
                    if std::mem::take(&mut hand_on)
                        && !self.queue.is_empty()
                        && !self.idle.is_empty()
                    {
                        self.notify_work();
                    }
                    if self.start_task(w, task) {
                        return;
                    }
                }
                None => {
                    self.park(w, self.now.saturating_add(ns(self.limits.keep_alive)));
                    return;
                }
            }
        }
    }

    /// Park `w` on top of the idle stack until `deadline`. A worker keeps at
    /// most one keep-alive event pending for its current deadline or an
    /// earlier one (which re-arms itself when it finds a later deadline), so
    /// the calendar grows with the workers, not with the parks.
    #[inline]
    pub(super) fn park(&mut self, w: u32, deadline: u64) {
        let worker = &mut self.workers[w as usize];
        worker.state = State::Idle;
        worker.deadline = deadline;
        if worker.timer > deadline {
            worker.timer = deadline;
            self.calendar.push(deadline, Event::KeepAlive(w));
        }
        self.idle.push_back(w);
    }

    #[inline]
    pub(super) fn keep_alive(&mut self, w: u32) {
        let now = self.now;
        let worker = &mut self.workers[w as usize];
        if worker.timer == now {
            worker.timer = u64::MAX;
        }
        if worker.state != State::Idle {
            return;
        }
        if worker.deadline > now {
            if worker.timer > worker.deadline {
                worker.timer = worker.deadline;
                let d = worker.deadline;
                self.calendar.push(d, Event::KeepAlive(w));
            }
            return;
        }
        // Its keep-alive ran out: off the idle stack, then retire or park again.
        if let Some(i) = self.idle.iter().position(|&x| x == w) {
            self.idle.remove(i);
        }
        match self.sizes.expire(self.limits.min) {
            Some(s) => {
                self.set_sizes(s);
                self.retire(w, true);
            }
            None => self.park(w, now.saturating_add(ns(self.limits.keep_alive))),
        }
    }

    #[inline]
    pub(super) fn retire(&mut self, w: u32, expired: bool) {
        self.workers[w as usize].state = State::Gone;
        self.free.push(w);
        if let Some(c) = &mut self.control {
            c.window.threads_retired += 1;
            if expired {
                if let Some(s) = &c.scheduler {
                    s.retired(&mut c.events);
                }
            }
        }
    }

    /// A thread per request: its task is done, the thread exits.
    #[inline]
    pub(super) fn leave(&mut self, w: u32) {
        self.workers[w as usize].state = State::Gone;
        self.free.push(w);
        self.sync_threads();
        self.threads -= 1;
    }

    /// `w` starts `task`; false if the task had nothing to do and is
    /// already complete.
    #[inline]
    pub(super) fn start_task(&mut self, w: u32, task: Task) -> bool {
        let wait = self.now - task.arrival;
        self.waiting -= 1;
        // Runs of equal waits (zero, or the wake-up cost) are recorded in bulk.
        if wait == self.wait_run.0 {
            self.wait_run.1 += 1;
        } else {
            self.wait.record_n(self.wait_run.0, self.wait_run.1);
            self.wait_run = (wait, 1);
        }
        self.wait_sum += u128::from(wait);
        if task.steady {
            self.steady.waited += 1;
            self.steady.wait_sum_ns += u128::from(wait);
            if self.threshold.is_some_and(|t| wait > t) {
                self.steady.waits_over += 1;
            }
        }
        if let Some(c) = &mut self.control {
            if c.scheduler.is_some() {
                c.window.wait.record(wait);
            }
        }
        // The replay's slicing; one slice when the task only computes or
        // only blocks, as `TaskBody::new` says, without its two `Duration`s
        // (a division each: the common case of a compute-only stream).
        let slices = if task.cpu == 0 || task.blocked == 0 {
            1
        } else {
            TaskBody::new(
                Duration::from_nanos(task.cpu),
                Duration::from_nanos(task.blocked),
            )
            .slices
        };
        // The hand-off's CPU, once: a worker that goes on to the next task
        // without parking pays none.
        let lead = if std::mem::take(&mut self.handed) {
            self.handoff_cpu
        } else {
            0
        };
        self.workers[w as usize].run = Some(Running::new(task, self.now, slices, lead));
        self.begin_slice(w)
    }

    /// A task finished now.
    #[inline]
    pub(super) fn complete(&mut self, run: Running) {
        let task = run.task;
        let now = self.now;
        self.completed += 1;
        self.in_system -= 1;
        self.last_finish = now;
        let service = now - run.started;
        let turnaround = now - task.arrival;
        self.processing.record(service);
        self.turnaround.record(turnaround);
        self.turnaround_sum += u128::from(turnaround);
        if self.closed {
            self.answered.push(task.index);
            self.wake_driver();
        }
        if task.steady {
            self.steady.completed += 1;
            self.steady.turnaround_sum_ns += u128::from(turnaround);
            if !self.steady.bins.is_empty() {
                let size = task.cpu + task.blocked;
                let i = self.bin_edges.partition_point(|&e| e < size);
                let bin = &mut self.steady.bins[i];
                bin.tasks += 1;
                bin.turnaround_sum_ns += u128::from(turnaround);
                bin.size_sum_ns += u128::from(size);
            }
        }
        if self.keep_records {
            self.records.push(TaskRecord {
                request_id: task.request_id,
                app_id: task.app_id,
                scheduled_ns: task.arrival,
                submitted_ns: task.arrival,
                accepted_ns: Some(task.arrival),
                started_ns: Some(run.started),
                finished_ns: Some(now),
            });
        }
        if let Some(c) = &mut self.control {
            if let Some(s) = &mut c.scheduler {
                s.completed(&mut c.events);
                let w = &mut c.window;
                w.completed += 1;
                w.service.record(service);
                // Every task is in the CPU sample, and the model's tasks
                // compute exactly `cpu` (plus their sleeps' own CPU, which
                // a thread's CPU clock counts) and want a core for nothing
                // else: their own compute share is cpu / (cpu + blocked).
                let sleeps = if task.blocked > 0 {
                    u64::from(run.slices) * self.sleep_cpu
                } else {
                    0
                };
                w.sampled_tasks += 1;
                w.sampled_task_cpu += Duration::from_nanos(task.cpu + sleeps);
                w.sampled_task_time += Duration::from_nanos(task.cpu + sleeps + task.blocked);
            }
        }
    }

    /// Call the policy if the scheduler has a call due now.
    #[inline(always)]
    pub(super) fn poll_policy(&mut self) {
        let Some(c) = &self.control else { return };
        if c.events == Events::default() && c.at.is_none_or(|t| self.now < t) {
            return;
        }
        self.call_due();
    }

    /// [`poll_policy`](Self::poll_policy) found a call due: make the calls.
    #[inline]
    pub(super) fn call_due(&mut self) {
        let now = Duration::from_nanos(self.now);
        let mut calls = 0u32;
        loop {
            let Some(c) = &mut self.control else { return };
            let Some(s) = &mut c.scheduler else {
                c.at = None;
                return;
            };
            match s.next(&mut c.events, now) {
                Next::Call(call) => {
                    self.call(call.trigger);
                    let Some(c) = &mut self.control else { return };
                    let schedule = c.policy.schedule();
                    if let Some(s) = &mut c.scheduler {
                        s.called(call, now, schedule);
                    }
                    calls += 1;
                    if calls >= 1_000 {
                        // A schedule that is always due (a zero period):
                        // the real controller would spin; let time move.
                        c.at = Some(self.now + 1_000_000);
                        return;
                    }
                }
                Next::At(t) => {
                    c.at = Some(ns(t));
                    return;
                }
                Next::Wait => {
                    c.at = None;
                    return;
                }
            }
        }
    }

    /// Call the policy for `trigger` and apply its decision.
    pub(super) fn call(&mut self, trigger: Trigger) {
        let now = self.now;
        let idle = self.idle.len().min(self.sizes.live_threads);
        // PoolStats is non_exhaustive: start from the default, set the gauges.
        let mut gauges = PoolStats::default();
        gauges.elapsed = Duration::from_nanos(now);
        gauges.live_threads = self.sizes.live_threads;
        gauges.busy_threads = self.sizes.live_threads - idle;
        gauges.idle_threads = idle;
        gauges.target_size = self.sizes.target;
        gauges.min_threads = self.limits.min;
        gauges.max_threads = self.limits.max;
        gauges.queue_len = self.queue.len();
        gauges.cores = self.cores;
        (gauges.submitted, gauges.completed) = (self.accepted, self.completed);
        let (busy, delay) = (
            self.cpu.busy_ns(),
            self.cpu.delay_ns() + self.pending_ns as f64,
        );
        let Some(c) = &mut self.control else { return };
        let mut window = std::mem::take(&mut c.window);
        window.elapsed = Duration::from_nanos(now - c.last_call);
        window.worker_cpu_time = Some(Duration::from_nanos((busy - c.cpu_at_call) as u64));
        window.worker_run_delay = Some(Duration::from_nanos((delay - c.delay_at_call) as u64));
        // The modelled machine runs nothing but the pool's workers.
        window.machine_cpu_time = Some((
            window.worker_cpu_time.unwrap_or_default(),
            window.elapsed * self.cores as u32,
        ));
        let obs = observation(trigger, &gauges, &window);
        c.last_call = now;
        c.cpu_at_call = busy;
        c.delay_at_call = delay;
        let decision = c.policy.decide(&obs);
        if decision.is_hold() {
            return;
        }
        let old_target = self.sizes.target;
        let applied = apply(&decision, &self.limits, self.sizes.target);
        self.limits = applied.limits;
        let new_target = self.apply_target(applied.target);
        if self.keep_decisions {
            self.decisions.push(DecisionEntry::new(
                now as f64 / 1e6,
                format!("{trigger:?}").to_lowercase(),
                old_target,
                new_target,
                decision.reason,
            ));
        }
    }

    /// A new target: spawn up to it, wake idle workers so the surplus retires.
    pub(super) fn apply_target(&mut self, n: usize) -> usize {
        let target = self.limits.clamp(n);
        self.set_sizes(self.sizes.with_target(target));
        while self.sizes.live_threads < target {
            match self.sizes.reserve(target) {
                Some(s) => {
                    self.set_sizes(s);
                    self.spawn_worker(None);
                }
                None => break,
            }
        }
        for _ in 0..self.sizes.surplus() {
            if !self.wake_one() {
                break;
            }
        }
        target
    }
}
