//! The compute-share (φ) estimate: CPU time over busy time less run delay,
//! from the pool's per-task samples or, before there are any, from thread
//! totals; and the ceiling φ gives (module docs of [`super`], point 1).

use std::time::Duration;

use super::super::Observation;
use super::{
    cores_busy_workers, utilization, Auto, CONTENDED_DELAY_SHARE, CORES_BUSY_PROBABILITY,
    CPU_SATURATED, DEFAULT_SLICE_ABOVE, DEFAULT_SLICE_CONTENTION_ABOVE, FIRST_SAMPLE_TASKS,
    MIN_BUSY_FOR_CPU, MIN_CPU_FRACTION, MIN_THREAD_WINDOW, SAMPLED_TASK_TIME, SEARCH_MAX,
    SHIFT_FACTOR, SHIFT_SPAN, SHIFT_TASKS, SHORT_SLICE_BELOW, SHORT_SLICE_CONTENTION_BELOW,
    SMOOTHING, STEAL_DEAD_BAND,
};

/// An exponentially weighted mean, weighted by elapsed time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Smoothed {
    pub(super) value: f64,
    primed: bool,
}

impl Smoothed {
    pub(super) const fn starting_at(value: f64) -> Self {
        Smoothed {
            value,
            primed: false,
        }
    }

    /// Whether a sample has come yet.
    pub(super) fn is_primed(&self) -> bool {
        self.primed
    }

    pub(super) fn update(&mut self, sample: f64, elapsed: Duration) {
        self.update_over(sample, elapsed, SMOOTHING);
    }

    /// [`update`](Self::update) with time constant `tau`.
    pub(super) fn update_over(&mut self, sample: f64, elapsed: Duration, tau: Duration) {
        if !self.primed {
            self.value = sample;
            self.primed = true;
            return;
        }
        let alpha = 1.0 - (-elapsed.as_secs_f64() / tau.as_secs_f64()).exp();
        self.value += alpha * (sample - self.value);
    }
}

/// Per-task CPU samples pooled over short windows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct PendingSample {
    cpu: Duration,
    time: Duration,
    tasks: u64,
    span: Duration,
}

impl Auto {
    /// The smoothed compute share of the tasks: CPU time over busy time less
    /// the time spent waiting for a core.
    pub fn cpu_fraction(&self) -> f64 {
        self.cpu_fraction.value
    }

    /// The useful-concurrency ceiling: the fewest workers that, all busy,
    /// keep every core busy 99% of the time when each is runnable with
    /// probability φ (a binomial count: see `cores_busy_workers`), within
    /// the user's bounds. About `cores / φ` plus a margin that grows as φ
    /// falls; exactly `cores` for CPU-bound work.
    pub fn ceiling(&self) -> usize {
        self.ceiling_at(CORES_BUSY_PROBABILITY)
    }

    /// [`Auto::ceiling`] without the user's bounds.
    fn unbounded_ceiling(&self) -> usize {
        cores_busy_workers(
            self.cores,
            self.runnable(),
            CORES_BUSY_PROBABILITY,
            SEARCH_MAX,
        )
    }

    /// The fewest workers that, all busy, keep every core busy with
    /// probability `p`, within the user's bounds.
    pub(super) fn ceiling_at(&self, p: f64) -> usize {
        let limit = self.max.min(SEARCH_MAX);
        self.clamp(cores_busy_workers(self.cores, self.runnable(), p, limit))
    }

    /// The probability that a busy worker is runnable, from φ past the
    /// dead band: the first quarter of blocked-to-compute ratio buys
    /// nothing, as CPU-bound work on a VM reads φ ≈ 1 − steal (stolen time
    /// is neither CPU time nor run delay) and should not grow on that.
    pub(super) fn runnable(&self) -> f64 {
        let phi = self.cpu_fraction.value.clamp(MIN_CPU_FRACTION, 1.0);
        let blocked = (1.0 / phi - 1.0 - STEAL_DEAD_BAND).max(0.0);
        1.0 / (1.0 + blocked)
    }

    /// Feed the window's samples into the φ estimate.
    pub(super) fn learn_phi(&mut self, obs: &Observation) {
        let secs = obs.window.as_secs_f64();
        if secs <= 0.0 {
            return;
        }
        // Best evidence first: the pool measured the CPU time of a sample of
        // tasks around each task. Their ratio is the tasks' own compute share
        // — no spinning, idle wake-ups or waiting for a core in it — and it is
        // there from the first finished tasks on.
        // Short windows (calls on events come a millisecond apart) are
        // pooled until the sample holds enough task time.
        let acc = &mut self.pending_sample;
        acc.cpu += obs.sampled_task_cpu;
        acc.time += obs.sampled_task_time;
        acc.tasks = acc.tasks.saturating_add(obs.sampled_tasks);
        acc.span += obs.window;
        if acc.time >= SAMPLED_TASK_TIME {
            let acc = std::mem::take(&mut self.pending_sample);
            let fade = (-acc.span.as_secs_f64() / SMOOTHING.as_secs_f64()).exp();
            // The pool already took out the time long sampled tasks spent
            // preempted (waiting for a core is neither compute nor blocking).
            let wanted = acc.time.as_secs_f64();
            let cpu = acc.cpu.as_secs_f64().min(wanted);
            // Measured per task, the sample outweighs anything the noisier
            // thread-level estimate said, and once it holds a few tasks, the
            // prior guess too. Until then it is weighed with the prior: one
            // task that lost its core for a millisecond the run delay does
            // not show (VM steal) would read as blocking work.
            let keep = if self.sampled { fade } else { 0.0 };
            self.sampled = true;
            if let Some(shifted) = self.mix_shift(cpu, wanted, acc.tasks, acc.span) {
                // The mix changed: the history describes other tasks.
                self.compute_sum = shifted.cpu.as_secs_f64();
                self.wanted_sum = shifted.time.as_secs_f64();
                let before = self.cpu_fraction.value;
                // Unbounded by the user's `max`: lookups in a busy database
                // and calls that wait on another service both reached it,
                // and the change went unseen.
                let ceiling = self.unbounded_ceiling();
                self.update_phi();
                let after = self.unbounded_ceiling();
                let (low, high) = (ceiling.min(after), ceiling.max(after));
                // What growth did for the old tasks says nothing about
                // these. Except while growth needs proof: then the tasks
                // wait on a machine with no core to spare (a local
                // database, say), their waits stretch and shrink with the
                // size itself, and a φ that follows the size is no new mix.
                if high >= 2 * low {
                    if self.needs_proof() {
                        // Unless the machine frees up: then the waits no
                        // longer stretch with the size (`Auto::prove`).
                        self.proof.mix_moved = true;
                    } else {
                        self.forget_cap();
                        self.proof = Default::default();
                    }
                }
                // More compute per task: the next tick takes the target
                // down to the new ceiling (`Auto::follow_mix_change`).
                self.mix_rose |= self.cpu_fraction.value > before;
            } else {
                self.compute_sum = self.compute_sum * keep + cpu;
                self.wanted_sum = self.wanted_sum * keep + wanted;
            }
            self.sampled_tasks = self.sampled_tasks.saturating_add(acc.tasks);
            if self.sampled_tasks >= FIRST_SAMPLE_TASKS {
                self.prior = 0.0;
            }
            self.update_phi();
            self.measured = true;
            return;
        }
        // Once tasks are sampled, the thread-level estimate below has
        // nothing to add; before, it needs a window long enough that the
        // run delay a worker has not been credited yet (the kernel adds it
        // when the worker gets its core back) is small beside it.
        if self.sampled || obs.window < MIN_THREAD_WINDOW {
            return;
        }
        // Busy time counts finished tasks only. A worker busy at both ends
        // of the window was busy through it unless it finished a task in
        // between, so `min(busy before, busy now − created) − completions`
        // workers × the window is a lower bound too. It is what tells the
        // first spawns, a few milliseconds into a run, and tasks longer than
        // the window, whether the busy workers compute.
        let busy_before = std::mem::replace(&mut self.last_busy, obs.busy);
        let through = obs
            .busy
            .saturating_sub(obs.threads_created as usize)
            .min(busy_before)
            .saturating_sub(usize::try_from(obs.completions).unwrap_or(usize::MAX));
        let busy = obs.busy_time.as_secs_f64().max(through as f64 * secs);
        if busy < MIN_BUSY_FOR_CPU.as_secs_f64() {
            return;
        }
        let Some(cpu) = obs.worker_cpu_time else {
            return;
        };
        let cpu = cpu.as_secs_f64();
        if let Some(delay) = obs.run_delay {
            // Time waiting for a core is neither compute nor blocking: take it
            // out, so φ is the tasks' own compute share, whoever holds the
            // cores (our workers or other processes). The run delay also holds
            // waits outside tasks (a worker woken or yielding while idle), so
            // φ is a ratio of sums that fade with the smoothing time
            // constant: windows with little task time, where that part
            // weighs most, count least (a first spawn a few milliseconds
            // into a run is soon outweighed by full ticks).
            let delay = delay.as_secs_f64();
            let wanted = busy - delay;
            if wanted >= MIN_BUSY_FOR_CPU.as_secs_f64() {
                if delay >= CONTENDED_DELAY_SHARE * (cpu + delay) || self.no_free_core(obs) {
                    // No evidence (`CONTENDED_DELAY_SHARE`; on a machine
                    // with no free core, a worker waiting for one has no
                    // run delay credited yet).
                    return;
                }
                let fade = (-secs / SMOOTHING.as_secs_f64()).exp();
                self.compute_sum = self.compute_sum * fade + cpu.min(wanted);
                self.wanted_sum = self.wanted_sum * fade + wanted;
                self.prior *= fade;
                self.update_phi();
                self.measured = true;
            }
            return;
        }
        // Without run delay, time spent waiting for a core would look like
        // blocking once more workers than cores are busy (and grow a
        // CPU-bound pool without end): φ may only fall on an uncontended
        // window.
        let phi = (cpu / busy).clamp(0.0, 1.0);
        let concurrency = busy / secs;
        let uncontended =
            concurrency <= self.cores as f64 && utilization(obs).is_some_and(|u| u < CPU_SATURATED);
        if uncontended || phi > self.cpu_fraction.value {
            self.cpu_fraction.update(phi, obs.window);
            self.measured = true;
        }
    }

    /// A change of the task mix: consecutive samples whose compute share
    /// lies beyond a factor of [`SHIFT_FACTOR`] from the estimate, all on
    /// the same side, holding [`SHIFT_TASKS`] tasks between them and
    /// spanning [`SHIFT_SPAN`] of the pool's time. Returns
    /// those samples pooled once they are enough (the estimate then starts
    /// over from them); one sample on the other side, or within the
    /// factor, clears them. A smoothed φ would take about half a second to
    /// follow, and the pool spawns on the old ceiling meanwhile.
    fn mix_shift(
        &mut self,
        cpu: f64,
        wanted: f64,
        tasks: u64,
        span: Duration,
    ) -> Option<PendingSample> {
        let estimate = self.cpu_fraction.value.max(MIN_CPU_FRACTION);
        let phi = cpu / wanted;
        let side = if phi > estimate * SHIFT_FACTOR {
            Some(true)
        } else if phi * SHIFT_FACTOR < estimate {
            Some(false)
        } else {
            None
        };
        let Some(higher) = side.filter(|_| self.prior == 0.0) else {
            self.shift = None;
            return None;
        };
        let (side, mut pooled) = self
            .shift
            .take()
            .unwrap_or((higher, PendingSample::default()));
        if side != higher {
            pooled = PendingSample::default();
        }
        pooled.cpu += Duration::from_secs_f64(cpu);
        pooled.time += Duration::from_secs_f64(wanted);
        pooled.tasks = pooled.tasks.saturating_add(tasks);
        pooled.span += span;
        if pooled.tasks >= SHIFT_TASKS && pooled.span >= SHIFT_SPAN {
            return Some(pooled);
        }
        self.shift = Some((higher, pooled));
        None
    }

    /// φ from the fading sums and what is left of the prior.
    fn update_phi(&mut self) {
        let wanted = self.wanted_sum + self.prior;
        if wanted > 0.0 {
            self.cpu_fraction.value = ((self.compute_sum + self.prior) / wanted).clamp(0.0, 1.0);
        }
    }

    /// Whether φ rests on enough evidence for the spawn limit to stop being
    /// a guess: a per-task sample of [`FIRST_SAMPLE_TASKS`] tasks, or so
    /// many completions that a pool able to sample would have: each worker
    /// CPU-samples its first 16 timed tasks, and a pool's first
    /// [`SHORT_STREAK`] tasks are all timed, whatever the sampling rate of
    /// short tasks later on (checked below at compile time) — so the rule
    /// does not assume a rate.
    ///
    /// [`SHORT_STREAK`]: crate::limits::SHORT_STREAK
    pub(super) fn settled(&self) -> bool {
        self.sampled_tasks >= FIRST_SAMPLE_TASKS || self.completions_seen >= 16 * FIRST_SAMPLE_TASKS
    }

    /// Short scheduler slices for workers that mostly block, once φ is
    /// settled; with hysteresis, so a φ near the line does not flip it.
    /// Not while other processes hold the cores (contention): a short-sliced
    /// worker that blocks and wakes often then lost throughput to them.
    /// Nor while the workers hold (nearly) every core themselves (a window
    /// of [`MIN_THREAD_WINDOW`] or more says so): a woken worker then
    /// finds no free core to start on sooner, and the short slice only
    /// preempts the computing workers more often.
    pub(super) fn choose_slice(&mut self, obs: &Observation) {
        if !self.settled() {
            return;
        }
        let (phi, contention) = (self.cpu_fraction.value, self.contention.value);
        let saturated =
            obs.window >= MIN_THREAD_WINDOW && utilization(obs).is_some_and(|u| u >= CPU_SATURATED);
        if phi > DEFAULT_SLICE_ABOVE || contention > DEFAULT_SLICE_CONTENTION_ABOVE || saturated {
            self.short_slice = false;
        } else if phi < SHORT_SLICE_BELOW && contention < SHORT_SLICE_CONTENTION_BELOW {
            self.short_slice = true;
        }
    }
}

// `settled`'s fallback counts completions that are all timed (see there).
const _: () = assert!(16 * FIRST_SAMPLE_TASKS <= crate::limits::SHORT_STREAK as u64);
