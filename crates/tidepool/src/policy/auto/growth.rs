//! Where growth stops besides the ceiling (module docs of [`super`], point
//! 9): at the tasks present, and — while other processes leave the pool no
//! free core — at the last size whose throughput proved growth pays.
//!
//! A worker past the tasks present finds nothing to run, however blocking
//! the tasks are. And a task that blocks may be waiting on another local
//! process (a database on the same cores): its wait reads as blocking (φ
//! small, the ceiling huge), yet more workers only queue more work for a
//! machine that has no core to spare. While the machine is busy and others
//! hold a share of it, the pool may therefore only double past a size it
//! measured with every worker given a task, and keeps the doubling only if
//! throughput rose by a quarter of the proportional gain (did not fall, up
//! to twice the cores while others hold less than half the machine:
//! [`Auto::free_growth`]); otherwise the
//! measured size becomes the learned cap. Tasks that block on something
//! else (sleep, a remote service) pass each doubling and keep growing.

use std::time::Duration;

use super::super::Observation;
use super::descent::Descent;
use super::feedback::{gain_needed, Pending, Probe};
use super::{utilization, Auto, FEEDBACK_MIN_COMPLETIONS, MIN_THREAD_WINDOW};

/// Share of the machine's CPU time busy (smoothed) from which it has no
/// core to spare.
pub(super) const MACHINE_BUSY: f64 = 0.9;
/// Shortest window whose machine-wide share is read on its own: the OS
/// counts the machine's CPU time in clock ticks (10 ms a core), so shorter
/// windows read 0 or 1.
const MACHINE_WINDOW: Duration = Duration::from_millis(12);
/// Time constant of the smoothed machine-wide shares: the pool can grow
/// by dozens of workers in a tenth of a second.
const MACHINE_SMOOTHING: Duration = Duration::from_millis(100);
/// Share of the machine's cores that other processes must hold (machine
/// busy less the pool's workers, smoothed) for growth to need proof.
const OTHERS_HOLD: f64 = 0.1;
/// Once growth needs proof, it does until the machine's busy share
/// (smoothed) falls below this or the others' below [`OTHERS_LEFT`]: a
/// saturated machine has moments with a core free, and each flicker out
/// of proof threw away what the proof had measured.
const MACHINE_FREE: f64 = 0.75;
/// See [`MACHINE_FREE`].
const OTHERS_LEFT: f64 = 0.05;
/// The tasks-present bound remembers the peak for between one and two of
/// these (two buckets).
const PEAK_BUCKET: Duration = Duration::from_secs(2);
/// Shortest span a proof probe pools (it needs [`FEEDBACK_MIN_COMPLETIONS`],
/// or two per worker, too): two ticks, so one noisy tick on a loaded
/// machine does not decide, and tasks that block on something else still
/// double their workers every 50 ms or so.
const PROOF_SPAN: Duration = Duration::from_millis(50);
/// How long after the pool's size last changed its windows are no
/// evidence for proof: one tick.
const SETTLE: Duration = Duration::from_millis(25);
/// How long after the size last changed a worker still in its start hook
/// or first task keeps the windows no evidence: a new worker's start
/// carries its setup (right after 33 → 67 handlers, which open their database
/// connections on their first request, a 218 ms span read 4,946/s where
/// the size serves 10,000), but a first task that never ends must not
/// hold proof off for good.
const FIRST_TASKS: Duration = Duration::from_millis(500);
/// Factor by which the throughput at the proven size must fall, the size
/// unchanged, to read as other tasks: growth is judged afresh. A database
/// at its limit serves about the same at a given size, whatever φ says
/// (its waits follow the size), but lookups that gave way to calls that
/// wait on another service served a tenth as many.
const COLLAPSE: f64 = 2.0;
/// Growth allowed past the last proven size while it needs proof.
const PROOF_FACTOR: usize = 2;
/// Growth past the proven size that gets a verdict: most of the way to
/// [`PROOF_FACTOR`]. A quarter more workers needs only 6% more throughput,
/// which two 50 ms spans of a loaded machine differ by anyway: such small
/// steps passed one after another up to 82 workers where 16 served best.
pub(super) const PROOF_MIN_GROWTH: f64 = 0.6;

/// The largest number of tasks present, over the last one to two
/// [`PEAK_BUCKET`]s.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Peak {
    current: usize,
    previous: usize,
    since: Duration,
}

impl Peak {
    fn record(&mut self, n: usize, now: Duration) {
        let age = now.saturating_sub(self.since);
        if age >= PEAK_BUCKET * 2 {
            (self.previous, self.current, self.since) = (0, 0, now);
        } else if age >= PEAK_BUCKET {
            (self.previous, self.current, self.since) = (self.current, 0, now);
        }
        self.current = self.current.max(n);
    }

    fn value(&self) -> usize {
        self.current.max(self.previous)
    }
}

/// The machine-wide CPU share pooled over calls until it spans
/// [`MACHINE_WINDOW`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct MachineSpan {
    /// Machine busy share × window, summed.
    busy: f64,
    /// The pool's own CPU share × window, summed.
    own: f64,
    window: Duration,
    /// Time of the span no reading covers yet: a window too short for any
    /// clock tick reads nothing, and the next reading's ticks cover it.
    unread: Duration,
    /// The last call found tasks in flight.
    loaded: bool,
}

/// A pooled span: its length, and the machine's and the pool's busy shares.
pub(super) struct MachineReading {
    window: Duration,
    machine: f64,
    own: f64,
}

impl MachineReading {
    /// The share other processes than the pool's workers held.
    fn others(&self) -> f64 {
        (self.machine - self.own).max(0.0)
    }
}

impl MachineSpan {
    /// Add a window (`machine`: its reading, if the OS counted any clock
    /// tick in it); once the pooled span is long enough, take it.
    fn add(&mut self, machine: Option<f64>, obs: &Observation) -> Option<MachineReading> {
        let loaded = std::mem::replace(&mut self.loaded, obs.in_flight > 0);
        let secs = obs.window.as_secs_f64();
        self.own += utilization(obs).unwrap_or(0.0) * secs;
        self.window += obs.window;
        self.unread += obs.window;
        let machine = machine?;
        if !loaded && machine < MACHINE_BUSY {
            // A window that began with nothing to run may be mostly the
            // idle moment before the load: at a run's start one read the
            // machine half idle while the load had already made it busy.
            *self = MachineSpan {
                loaded: self.loaded,
                ..MachineSpan::default()
            };
            return None;
        }
        self.busy += machine * std::mem::take(&mut self.unread).as_secs_f64();
        if self.window < MACHINE_WINDOW {
            return None;
        }
        let span = std::mem::replace(
            self,
            MachineSpan {
                loaded: true,
                ..MachineSpan::default()
            },
        );
        let secs = span.window.as_secs_f64();
        Some(MachineReading {
            window: span.window,
            machine: (span.busy / secs).clamp(0.0, 1.0),
            own: (span.own / secs).clamp(0.0, 1.0),
        })
    }
}

/// A move proof asks for, with the spans its verdict read: the decision
/// log then shows the throughputs compared, not only the conclusion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Move {
    /// The size to go to.
    pub(super) size: usize,
    /// Why, in a few words.
    pub(super) why: &'static str,
    /// The span judged, if any.
    pub(super) judged: Option<Probe>,
    /// The span it was judged against, or the one a trial starts from.
    pub(super) against: Probe,
}

impl Move {
    /// The reason for the decision log: `why`, then the spans as
    /// `[n workers: throughput over span; …]`.
    fn reason(&self) -> String {
        let span = |p: Probe| {
            format!(
                "{} workers: {:.0}/s over {} ms",
                p.threads,
                p.throughput,
                p.span.as_millis()
            )
        };
        match self.judged {
            Some(judged) => format!("{} [{}; {}]", self.why, span(judged), span(self.against)),
            None => format!("{} [{}]", self.why, span(self.against)),
        }
    }
}

/// Growth that must prove itself: the last size measured with every worker
/// given a task, and the windows pooled for the next measurement.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Proof {
    pub(super) base: Option<Probe>,
    pub(super) pending: Pending,
    /// A window of the pending span had idle workers.
    idle: bool,
    /// A size to go to at the next tick, and why: back from a doubling
    /// that did not pay, or a trial of other sizes and back from it.
    pub(super) move_to: Option<Move>,
    /// The trials of fewer workers.
    pub(super) descent: Descent,
    /// Whether growth past the base may be tried: it came from a doubling
    /// that paid or half of it served less. Otherwise a size the pool
    /// reached before proof began is tried from above first (a fresh pool
    /// that met 256 clients doubled from 73 workers to 146 before its
    /// first trial), unless no trial can come soon (`proof_gate`).
    pub(super) tested: bool,
    /// The time of the last call while proof was needed.
    now: Duration,
    /// Windows before this are no evidence: the size just changed.
    steady_from: Duration,
    /// When workers were last started or retired (kept between proofs).
    changed_at: Duration,
    /// φ moved as for a new mix while growth needed proof: no evidence
    /// then, but it is once the machine frees up.
    pub(super) mix_moved: bool,
}

impl Auto {
    /// Feed the window's machine-wide CPU share and tasks present. Windows
    /// are pooled until they span [`MACHINE_WINDOW`]: while the pool spawns,
    /// calls come a millisecond apart, and the first busy reading it could
    /// act on came only after it had grown to 67 workers.
    pub(super) fn learn_machine(&mut self, obs: &Observation) {
        self.peak.record(obs.in_flight, obs.now);
        let Some(span) = self.machine_span.add(obs.machine_busy, obs) else {
            return;
        };
        self.machine
            .update_over(span.machine, span.window, MACHINE_SMOOTHING);
        self.others
            .update_over(span.others(), span.window, MACHINE_SMOOTHING);
        self.machine_was_busy = span.machine >= MACHINE_BUSY;
        // In and out on the same evidence: a busy span keeps proof on
        // (at a run's start the smoothed share, primed by the idle moment
        // before the load, lagged the busy spans, and each flicker out of
        // proof let the pool grow).
        let enter = self.machine_was_busy || self.machine.value >= MACHINE_BUSY;
        self.proving = if enter && self.others.value >= OTHERS_HOLD {
            true
        } else if self.proving {
            (self.machine.value >= MACHINE_FREE && self.others.value >= OTHERS_LEFT)
                || self.proof.descent.holds_proof(obs.now)
        } else {
            false
        };
    }

    /// Whether the machine had no free core in `obs`'s window (or, when the
    /// window is too short for the OS's clock ticks, lately): a worker
    /// waiting for one then has no run delay credited yet, and its thread
    /// totals read as blocking.
    pub(super) fn no_free_core(&self, obs: &Observation) -> bool {
        match obs.machine_busy {
            Some(m) if obs.window >= MIN_THREAD_WINDOW => m >= MACHINE_BUSY,
            _ => self.machine.is_primed() && self.machine.value >= MACHINE_BUSY,
        }
    }

    /// Whether growth must prove itself: the machine has no core to spare
    /// (lately, or in the last window long enough to tell) and other
    /// processes hold a share of it; and, once it must, until the machine
    /// or the others' share is clearly lower ([`MACHINE_FREE`]).
    pub(super) fn needs_proof(&self) -> bool {
        self.proving
    }

    /// The most workers growth may reach now: the peak of tasks present
    /// plus one per core, and while growth needs proof, twice the last
    /// proven size (no growth until one is measured). Never below the
    /// target: this stops growth, it does not shrink.
    pub(super) fn growth_bound(&self) -> usize {
        self.present_bound()
            .min(self.proof_gate().unwrap_or(usize::MAX))
            .max(self.target)
    }

    /// The peak of tasks present plus one per core.
    pub(super) fn present_bound(&self) -> usize {
        self.peak.value().saturating_add(self.cores)
    }

    /// The size last measured with every worker given a task, while growth
    /// needs proof (0 before one is).
    pub(super) fn measured_size(&self) -> usize {
        self.proof.base.map_or(0, |b| b.threads)
    }

    /// While growth needs proof, twice the last proven size once growth
    /// past it may be tried (the proven size until then), or the target
    /// until one is measured.
    fn proof_gate(&self) -> Option<usize> {
        self.needs_proof().then(|| {
            if let Some(size) = self.proof.descent.size() {
                return size;
            }
            // No trial can come soon: it waits, or others hold too little
            // of the machine for one (`sat50`'s pool, whose workers held
            // 80% of it, stayed at 6 workers for a third of its run).
            let tried = self.proof.tested
                || !self.proof.descent.ready(self.proof.now)
                || !self.others_hold_most();
            let factor = if tried { PROOF_FACTOR } else { 1 };
            self.proof
                .base
                .map_or(self.target, |b| b.threads.saturating_mul(factor))
        })
    }

    /// The size fewer workers are on trial at, while growth needs proof.
    pub(super) fn trial_size(&self) -> Option<usize> {
        self.needs_proof()
            .then(|| self.proof.descent.size())
            .flatten()
    }

    /// At every call: while growth needs proof and every worker had a task,
    /// pool the window, and once a span is long enough compare its
    /// throughput with the proven size's. Otherwise start over.
    pub(super) fn prove(&mut self, obs: &Observation) {
        let changed = obs.threads_created > 0 || obs.threads_retired > 0;
        if changed {
            self.proof.changed_at = obs.now;
        }
        if !self.needs_proof() {
            if self.proof.mix_moved {
                // The machine freed up after φ moved: a new mix after all
                // (lookups that turned into calls waiting on another
                // service kept the lookups' cap of 3 workers for 5 s, as
                // the machine was free before proof had a span to judge).
                self.forget_cap();
            }
            // The trials' wait outlives a flicker of the machine out of
            // proof: calls waiting on another service on a machine near
            // the line tried half their workers every 0.3 s.
            self.proof = Proof {
                descent: self
                    .proof
                    .descent
                    .between_proofs(self.proof.base.map(|b| b.threads)),
                changed_at: self.proof.changed_at,
                ..Proof::default()
            };
            return;
        }
        self.proof.now = obs.now;
        self.watch_trial(obs);
        let starting = obs.starting > 0 && obs.now < self.proof.changed_at + FIRST_TASKS;
        if changed || starting {
            self.proof.steady_from = obs.now + SETTLE;
        }
        if obs.now < self.proof.steady_from {
            // The size is still moving or just moved: a new worker's first
            // task carries its start (a handler's first request opens its
            // database connection), and a doubling judged on them read as
            // growth that did not pay, a trial of half as serving as much.
            // The span starts once the size holds and the new workers'
            // first tasks are done.
            self.proof.pending = Pending::default();
            self.proof.idle = false;
            return;
        }
        self.proof.idle |= obs.in_flight < obs.live;
        // Long tasks complete slowly: two per worker are enough then.
        let completions = FEEDBACK_MIN_COMPLETIONS.min(2 * obs.live as u64);
        let Some(now) = self.proof.pending.add(obs, completions, PROOF_SPAN) else {
            return;
        };
        // A size with idle workers is no base (its throughput says nothing
        // of what it could do), but it is a verdict on the doubling that
        // made it: more workers than tasks and no more throughput is growth
        // that did not pay. (Waiting for a span without idle workers, the
        // verdict never came: 64 clients never keep 67 workers busy.)
        let full = !std::mem::take(&mut self.proof.idle);
        if self.descend(now, obs.now) {
            return;
        }
        if let Some(base) = self.proof.base.filter(|b| b.threads == now.threads) {
            if now.throughput * COLLAPSE < base.throughput {
                // Other tasks: what growth and trials did for the old
                // ones says nothing about these.
                self.forget_cap();
                self.proof.descent = Descent::default();
                self.proof.base = full.then_some(now);
                self.proof.tested = true;
                return;
            }
        }
        let Some(base) = self.proof.base.filter(|b| now.threads > b.threads) else {
            // The first size measured, or a smaller one: the new base.
            if full {
                self.proof.base = Some(now);
            }
            return;
        };
        let growth = now.threads as f64 / base.threads as f64 - 1.0;
        if growth < PROOF_MIN_GROWTH {
            // On the way to the doubling: no verdict, the base stays.
            return;
        }
        if now.throughput
            >= base.throughput * gain_needed(self.free_growth(), base.threads, now.threads)
        {
            if full {
                self.proof.base = Some(now);
            }
            self.forget_cap();
            self.proof.tested = true;
        } else {
            if now.throughput > base.throughput {
                self.proof.descent.doubling_gained(base.threads);
            }
            self.learn_cap(base.threads, obs.now);
            self.proof.move_to = Some(Move {
                size: base.threads,
                why: "growth did not pay: back to the proven size",
                judged: Some(now),
                against: base,
            });
        }
    }

    /// Carry out a move proof asked for: back from a doubling that did not
    /// pay (the workers past the proven size are not idle spares, as every
    /// one had a task, but more requests queued in the process the tasks
    /// wait on), or a trial of fewer workers and back from it. Returns
    /// why, with the spans judged, if the target moved.
    pub(super) fn follow_proof(&mut self) -> Option<String> {
        let to = self.proof.move_to.take()?;
        let size = self.clamp(to.size);
        if size == self.target {
            return None;
        }
        self.target = size;
        self.low_for = Duration::ZERO;
        Some(to.reason())
    }
}
