//! A worker thread: take a task, run it, record it; when there is none, spin
//! briefly (unless it just ran a lone task into a quiet pool:
//! [`parks_at_once`]), then park on the LIFO idle stack; retire when the pool
//! shrinks or the keep-alive runs out above the target size.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::shared::{Shared, NO_SLICE};
use super::sleep::{Parker, Wake};
use crate::metrics::clock::Clock;
use crate::metrics::cpu_sample::CpuSample;
use crate::metrics::record::WorkerRecord;
use crate::metrics::sampling::Streaks;
use crate::sync::{lock, Arc};
use crate::sys as os;
use crate::task::Task;

/// Start one worker thread. The caller has already reserved its slot in `live_threads`.
///
/// Spawning happens under the `threads` lock and is refused once the pool's
/// shutdown has settled, so `shutdown` (which settles it, then joins until
/// `threads` stays empty) never misses a worker that a racing `resize` or
/// submit started.
pub(crate) fn spawn(shared: &Arc<Shared>) -> std::io::Result<()> {
    let mut threads = lock(&shared.threads);
    if shared.is_shutdown_settled() {
        shared.drop_live();
        return Err(std::io::Error::other("the pool is shut down"));
    }
    let id = shared.next_worker_id.fetch_add(1, Relaxed);
    let settings = &shared.config.threads;
    let mut builder = std::thread::Builder::new().name(settings.name(&shared.config.name, id));
    if let Some(bytes) = settings.stack_size {
        builder = builder.stack_size(bytes);
    }
    let worker_shared = shared.clone();
    let spawned = super::spawn::thread(builder, move || {
        Worker::new(worker_shared, id).run_with_hooks()
    });
    match spawned {
        Ok(handle) => {
            threads.push((id, handle));
            drop(threads);
            shared.counters.created.fetch_add(1, Relaxed);
            shared.sample_size();
            crate::events::spawned(&shared.config.name, id);
            Ok(())
        }
        Err(e) => {
            // The pool goes on with the workers it has.
            shared.counters.spawn_failed.fetch_add(1, Relaxed);
            shared.drop_live();
            Err(e)
        }
    }
}

thread_local! {
    /// The pool whose worker this thread is (its `Shared`'s address), or 0.
    static POOL: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

thread_local! {
    /// The pool whose worker this thread is, for [`current`].
    static CURRENT: std::cell::RefCell<Option<Arc<Shared>>> = const { std::cell::RefCell::new(None) };
}

/// The pool the calling thread is a worker of, if any.
pub(crate) fn current() -> Option<Arc<Shared>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Clears [`CURRENT`] when the worker loop ends, however it ends.
struct Registered;

impl Registered {
    fn new(shared: &Arc<Shared>) -> Registered {
        CURRENT.with(|c| *c.borrow_mut() = Some(shared.clone()));
        Registered
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

/// Whether the calling thread is one of `shared`'s workers.
pub(crate) fn is_worker_of(shared: &Shared) -> bool {
    POOL.with(|p| p.get() == shared.id())
}

/// Spin rounds of a worker that found the queue empty (counted as searching)...
const SPIN_ROUNDS: u32 = 7;
/// ...then yields (not counted) before it parks.
const YIELD_ROUNDS: u32 = 4;
/// A park at least this long ended an idle period: the pool had nothing to
/// do (bursts and busy periods re-wake a worker within microseconds).
const IDLE_PARK_NS: u64 = 100_000;
/// Timed tasks whose CPU time every worker measures first...
const CPU_SAMPLE_FIRST: u64 = 16;
/// ...and then one timed task in this many while tasks are long...
const CPU_SAMPLE_EVERY: u64 = 16;
/// ...and one in this many while they are short (the two system calls
/// would cost a tenth of a microsecond-long task otherwise).
const CPU_SAMPLE_EVERY_SHORT: u64 = 256;
/// ...and whichever the rate, a task as soon as this worker's last sample
/// is this old (ns): a worker of 5 ms calls that samples one task in 16
/// measured a change of the task mix only after 16 of them, and while
/// three workers waited out the old mix's small ceiling, 64 requests
/// queued for a third of a second.
const CPU_SAMPLE_AGE_NS: u64 = 20_000_000;
/// Sampled tasks at least this long count as long: they also get their run
/// delay measured, and keep the CPU sample at one in 16.
const LONG_TASK_NS: u64 = 100_000;

struct Worker {
    shared: Arc<Shared>,
    id: u64,
    parker: Arc<Parker>,
    record: Option<Arc<WorkerRecord>>,
    /// Runs of short and of long timed tasks (see `Sampler`).
    streaks: Streaks,
    /// Timed tasks run so far: picks which ones get their CPU time measured.
    timed: std::cell::Cell<u64>,
    /// The last CPU-sampled task ran long enough to sample its run delay.
    long_tasks: std::cell::Cell<bool>,
    /// Clock ticks at the end of the last CPU-sampled task, and of the last
    /// timed task (0: none yet).
    sampled_at: std::cell::Cell<u64>,
    timed_at: std::cell::Cell<u64>,
    /// The scheduler slice this thread last asked for (`NO_SLICE`: none).
    slice_ns: std::cell::Cell<u64>,
    /// Tasks taken since the last wake-up (saturating).
    since_wake: std::cell::Cell<u32>,
    /// The last wake-up ended an idle period (a park of `IDLE_PARK_NS` or more).
    woke_from_idle: std::cell::Cell<bool>,
    /// This worker has taken a task (its first counts in `Shared::starting`).
    started: std::cell::Cell<bool>,
}

/// Whether a worker that found the queue empty parks at once instead of
/// searching: it was woken after an idle period, took one task, and every
/// other worker is parked — a lone task into a quiet pool. Its search would
/// find nothing, and its yields would cost the next lone task: EEVDF lets
/// a woken thread preempt the submitter only if it did not give its time
/// away before it slept, and a worker that yielded did. Parked at once, the
/// next lone task starts as soon as its submitter wakes this worker, not
/// when the submitter blocks. A burst still gets the search: its first
/// worker takes more than one task, or finds a peer running.
fn parks_at_once(woke_from_idle: bool, since_wake: u32, idle: usize, live: usize) -> bool {
    woke_from_idle && since_wake == 1 && idle + 1 >= live
}

impl Worker {
    fn new(shared: Arc<Shared>, id: u64) -> Self {
        let record = shared.records.as_ref().map(|r| r.register());
        Worker {
            shared,
            id,
            parker: Arc::new(Parker::default()),
            record,
            streaks: Streaks::default(),
            timed: std::cell::Cell::new(0),
            long_tasks: std::cell::Cell::new(true),
            sampled_at: std::cell::Cell::new(0),
            timed_at: std::cell::Cell::new(0),
            slice_ns: std::cell::Cell::new(NO_SLICE),
            since_wake: std::cell::Cell::new(0),
            woke_from_idle: std::cell::Cell::new(false),
            started: std::cell::Cell::new(false),
        }
    }

    /// The thread's life: the start hook, the worker loop, the stop hook.
    fn run_with_hooks(self) {
        let shared = self.shared.clone();
        let threads = &shared.config.threads;
        // A panicking hook must not kill the worker (its `live_threads` slot would
        // never be given back); the panic hook has already reported it.
        let hook = |f: &Option<super::builder::ThreadFn>| {
            if let Some(f) = f {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f()));
            }
        };
        // Its start hook is as much the thread's start as its first task
        // (setup such as opening a database connection may be in either).
        if threads.on_start.is_some() {
            shared.starting.fetch_add(1, Relaxed);
            hook(&threads.on_start);
            shared.starting.fetch_sub(1, Relaxed);
        }
        self.run();
        hook(&threads.on_stop);
    }

    fn run(self) {
        let shared = &*self.shared;
        POOL.with(|p| p.set(shared.id()));
        let _registered = Registered::new(&self.shared);
        // Consecutive workers pop from different shards first.
        crate::queue::set_home(self.id as usize);
        // Woken as the last worker on its way: once it has a task, it wakes
        // the next if work is left (see `pool::sleep`, one wake-up in flight).
        let mut hand_on = false;
        loop {
            if self.surplus() && shared.release_surplus() {
                // Shrinking: retire between tasks, never during one. A task
                // whose submitter counted on us (we were searching) goes to
                // a parked peer.
                shared.sleepers.hand_on(|| !shared.queue.is_empty());
                self.retire(false);
                return;
            }
            if let Some(task) = shared.queue.pop().or_else(|| self.search()) {
                if std::mem::take(&mut hand_on) {
                    shared.sleepers.hand_on(|| !shared.queue.is_empty());
                }
                // After the pop, so a slice the policy set before this task
                // was submitted is in force for it (the pop synchronises with
                // the push), however long this worker had been searching.
                self.follow_slice();
                self.since_wake.set(self.since_wake.get().saturating_add(1));
                self.execute(task);
                continue;
            }
            if shared.is_shutdown_settled() && shared.queue.is_empty() {
                // Shutdown: the pool is going away, no floor to respect.
                shared.drop_live();
                break;
            }
            if self.surplus() {
                continue;
            }
            let has_work =
                || !shared.queue.is_empty() || shared.is_shutdown_settled() || self.surplus();
            let parked_at = Clock::ticks();
            let woke = shared
                .sleepers
                .park(&self.parker, Some(shared.keep_alive()), has_work);
            let idle_ns = Clock::nanos_between(parked_at, Clock::ticks());
            self.woke_from_idle
                .set(matches!(woke, Wake::Notified { .. }) && idle_ns >= IDLE_PARK_NS);
            self.since_wake.set(0);
            hand_on = woke == Wake::Notified { last: true };
            if woke == Wake::TimedOut && shared.expire_worker() {
                self.retire(true);
                return;
            }
        }
        self.leave();
    }

    /// More workers are alive than the target: this one should go.
    #[inline]
    fn surplus(&self) -> bool {
        self.shared.has_surplus()
    }

    /// The queue looked empty: spin (then yield) a little, when the queue
    /// flavor is cheap to poll. A spinner that finds work while it was the
    /// last one spinning wakes a parked peer, so bursts ramp up to full
    /// parallelism.
    ///
    /// Only the spin phase counts as searching (submitters skip waking a
    /// parked worker while someone searches). A worker that yields may not
    /// run again for a whole scheduler slice on a busy machine (EEVDF pushes
    /// a yielder's deadline back by a slice): counted, it would hold up the
    /// wake-up a queued task needs for milliseconds.
    fn search(&self) -> Option<Task> {
        let shared = &*self.shared;
        if !shared.queue.spin_before_park() || shared.is_shutdown_settled() {
            return None;
        }
        if parks_at_once(
            self.woke_from_idle.get(),
            self.since_wake.get(),
            shared.sleepers.idle(),
            shared.live_threads(),
        ) {
            // Once: woken again soon, it is in a burst and searches.
            self.woke_from_idle.set(false);
            return None;
        }
        shared.sleepers.start_search();
        let mut counted = true;
        let mut last = false;
        let mut round = 0;
        let found = loop {
            if let Some(t) = shared.queue.pop() {
                break Some(t);
            }
            if round == SPIN_ROUNDS + YIELD_ROUNDS || self.surplus() {
                break None;
            }
            if round < SPIN_ROUNDS {
                // 1, 2, 4, … 64 pause hints: about a microsecond in all.
                for _ in 0..1u32 << round {
                    std::hint::spin_loop();
                }
            } else {
                if counted {
                    counted = false;
                    last = shared.sleepers.end_search();
                    if !shared.queue.is_empty() {
                        continue;
                    }
                }
                std::thread::yield_now();
            }
            round += 1;
        };
        if counted {
            last = shared.sleepers.end_search();
        }
        if found.is_some() && last && !shared.queue.is_empty() && !shared.sleepers.notify_work() {
            // Work is left and nobody is parked to take it: the submitters
            // skipped growing while we spun, so the decision falls to us.
            super::grow_if_starved(&self.shared);
        }
        found
    }

    /// Run a task; a panic that no handle took goes to the panic handler.
    #[inline]
    fn call(&self, task: Task) -> bool {
        match task.call_catching() {
            Ok(panicked) => panicked,
            Err(payload) => {
                if let Some(handler) = &self.shared.config.threads.on_panic {
                    let payload = crate::error::Panic::new(payload);
                    // A panicking handler must not take the worker down.
                    let _ =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(payload)));
                }
                true
            }
        }
    }

    /// Run one task and record it (timed if the submitter stamped it).
    #[inline]
    fn execute(&self, task: Task) {
        let shared = &*self.shared;
        shared.notify_room();
        let first = !self.started.replace(true);
        if first {
            shared.starting.fetch_add(1, Relaxed);
        }
        let panicked = match &self.record {
            None => self.call(task),
            Some(record) => {
                record.task_started();
                let stamps = task.stamps;
                if stamps.submitted == 0 {
                    let panicked = self.call(task);
                    record.task_untimed(panicked);
                    panicked
                } else {
                    let n = self.timed.get();
                    self.timed.set(n + 1);
                    // The thread's CPU clock costs a system call: read it
                    // around the first tasks (so a policy learns early how
                    // much of a task is compute), then one task in 16 while
                    // tasks are long, one in 256 while they are short, and
                    // one whenever the last sample is 20 ms old.
                    let every = if self.long_tasks.get() {
                        CPU_SAMPLE_EVERY
                    } else {
                        CPU_SAMPLE_EVERY_SHORT
                    };
                    let stale = self.timed_at.get() != 0
                        && Clock::nanos_between(self.sampled_at.get(), self.timed_at.get())
                            >= CPU_SAMPLE_AGE_NS;
                    let sample_cpu = n < CPU_SAMPLE_FIRST || n.is_multiple_of(every) || stale;
                    // For long tasks also the run delay (a `/proc` read), so
                    // time the task spent preempted, waiting for a core,
                    // counts as neither compute nor blocking.
                    let with_delay = self.long_tasks.get();
                    let sample = if sample_cpu {
                        CpuSample::start(record, with_delay)
                    } else {
                        None
                    };
                    let started = Clock::ticks();
                    let panicked = self.call(task);
                    let finished = Clock::ticks();
                    self.timed_at.set(finished);
                    if sample_cpu {
                        self.sampled_at.set(finished);
                    }
                    if let Some(sample) = sample {
                        let service = Clock::nanos_between(started, finished);
                        if let Some((cpu, wanted)) = sample.finish(record, service) {
                            record.task_cpu(cpu, wanted);
                            self.long_tasks.set(service >= LONG_TASK_NS);
                        }
                    }
                    record.task_done(
                        stamps.submitted,
                        stamps.accepted,
                        started,
                        finished,
                        panicked,
                    );
                    shared
                        .sampler
                        .observe(Clock::nanos_between(started, finished), &self.streaks);
                    panicked
                }
            }
        };
        if first {
            shared.starting.fetch_sub(1, Relaxed);
        }
        if panicked {
            shared.counters.panicked.fetch_add(1, Relaxed);
        }
        let every = shared.control.every_completions.load(Relaxed);
        if every > 0 && shared.control.completions.fetch_add(1, Relaxed) + 1 >= every {
            shared.control.completions.store(0, Relaxed);
            shared.control.raise(|f| f.events.completions = true);
        }
    }

    /// Ask the scheduler for the slice the policy wants, if it changed since
    /// this worker last asked (one relaxed load per task otherwise).
    #[inline]
    fn follow_slice(&self) {
        let want = self.shared.worker_slice_ns.load(Relaxed);
        if want != self.slice_ns.get() {
            self.slice_ns.set(want);
            os::request_slice(Duration::from_nanos(want));
        }
    }

    /// Leave the pool for good after `live_threads` was decremented.
    fn retire(&self, keep_alive_expired: bool) {
        let shared = &*self.shared;
        shared.sample_size();
        crate::events::retired(&shared.config.name, self.id, keep_alive_expired);
        if keep_alive_expired && shared.control.want_retired.load(Relaxed) {
            shared.control.raise(|f| f.events.retired = true);
        }
        // Our handle moves to the retired list, which shutdown joins; the
        // handles of workers that have ended since are joined (reaped) here,
        // so the list stays as short as the workers still on their way out.
        // The move happens under the `threads` lock, so a shutdown that
        // finds `threads` empty finds every leaving worker in `retired`.
        let done = {
            let mut threads = lock(&shared.threads);
            match threads.iter().position(|(id, _)| *id == self.id) {
                Some(i) => {
                    let handle = threads.swap_remove(i).1;
                    let mut retired = lock(&shared.retired);
                    let (done, going): (Vec<_>, Vec<_>) =
                        retired.drain(..).partition(|h| h.is_finished());
                    *retired = going;
                    retired.push(handle);
                    done
                }
                None => Vec::new(),
            }
        };
        done.into_iter().for_each(|h| {
            let _ = h.join();
        });
        self.leave();
    }

    fn leave(&self) {
        if let (Some(records), Some(record)) = (&self.shared.records, &self.record) {
            records.retire(record);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::parks_at_once;

    /// Only a lone task into a quiet pool skips the search: not a second
    /// task of the same wake-up, not a wake-up inside a busy period, not
    /// while another worker runs.
    #[test]
    fn only_a_lone_task_after_idle_parks_at_once() {
        assert!(parks_at_once(true, 1, 1, 2));
        assert!(parks_at_once(true, 1, 0, 1));
        assert!(!parks_at_once(false, 1, 1, 2), "woken inside a busy period");
        assert!(!parks_at_once(true, 2, 1, 2), "a burst: more than one task");
        assert!(!parks_at_once(true, 0, 1, 2), "no task taken");
        assert!(!parks_at_once(true, 1, 0, 2), "another worker runs");
    }
}
