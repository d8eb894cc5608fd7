//! Other sizes on trial (module docs of [`super`], point 10). While
//! growth needs proof, the pool may still be larger than the process its
//! tasks wait on can serve: it grew before the machine read busy (a fresh
//! pool met 64 clients and started 74 workers in 70 ms), or a doubling
//! passed on noise. Each worker past what that process serves queues one
//! more request in it, where it waits behind the others and stretches
//! their latency; the throughput does not rise.
//!
//! So, while other processes hold half the machine or more, the pool
//! tries half its size. If the span there served at
//! least as many tasks a second, the smaller size becomes the
//! proven size and the learned cap (growth past it proves itself again
//! once the cap expires), and the next trial may follow at once. Otherwise
//! the pool goes back to the size it came from at once (as soon as its
//! first tick, settling included, serves a quarter less: calls that wait
//! on another service lose half their throughput with half the workers,
//! and each tick of a trial queues their requests), and waits before
//! the next trial: 5 s, twice as long after each trial that failed in a
//! row (at most 60 s; a trial cut short by the end of proof counts as
//! failed). A trial starts only from a size whose span is measured and
//! whose doubling awaits no verdict (a doubling is judged first). Growth
//! past a size the pool reached before proof began waits for its first
//! trial (while one may come): half of it must serve less. A pool that
//! grew to twice the size measured before proof last ended or more is
//! tried at once, whatever the wait: the machine read free for a moment (a
//! trial of 8 workers let the database idle), spawning took 16 workers to
//! 76, and the wait of the failed trial held them there for the rest of
//! the phase.
//!
//! A trial of half that served less, but not a quarter less, says the
//! best size lies between: throughput that follows the workers would have
//! lost half. The next trial then follows at once with three quarters of
//! the size, and the two count as one trial for the wait (trials of half
//! of 20–27 writers lost 1–21%, and the pool held 20–27 for 5 s).
//!
//! Upward the same: a doubling that raised throughput, but not by a quarter
//! of the proportional gain, says the best size may lie between (a curve
//! that flattens out gains less over a doubling than over its first
//! steps). Four thirds of the size are tried at once, kept if they raise
//! throughput by a quarter of their own proportional gain, and each step
//! kept is followed by the next (writes whose throughput rose 7% from 16
//! to 32 workers ended their phase at 14–35 workers, median 17; with these
//! steps at 25–70, median 32).

use std::time::Duration;

use super::super::Observation;
use super::feedback::{gain_needed, Pending, Probe};
use super::growth::{Move, PROOF_MIN_GROWTH};
use super::{Auto, CAP_MEMORY, FEEDBACK_MIN_COMPLETIONS, MAX_CAP_MEMORY, TICK};

/// The span a trial's throughput and the size it starts from are measured
/// over: longer than a proof span, as the throughput differences it judges
/// are smaller (over 100 ms, trials that lost a tenth of the throughput
/// passed on noise and took the pool down to 7 where 16 served best).
const DESCENT_SPAN: Duration = Duration::from_millis(200);
/// How long a trial keeps growth under proof however free the machine
/// reads ([`Descent::holds_proof`]): a trial lasts 200–300 ms.
const TRIAL_HOLDS_PROOF: Duration = Duration::from_secs(1);
/// Share of the machine other processes must hold (smoothed) for a trial:
/// the tasks then likely wait on one of them (a database held 0.75–0.88).
/// Beside a replay's own driver (0.1–0.2), trials of half of a CPU-bound
/// pool passed on noise and cost `sat10` 6% of its throughput.
const DESCENT_OTHERS: f64 = 0.5;
/// The size tried, as a fraction of the current one: the inverse of a
/// proof's doubling. Two-thirds steps took a pool that met 256 clients
/// from 64 workers to 14 in five trials, a second of the phase.
const DESCENT_FACTOR: f64 = 0.5;
/// Loss of throughput on trial that needs no full [`DESCENT_SPAN`]: two
/// 50 ms spans of a loaded machine differ by about 6%, a trial of half the
/// workers of calls that wait on another service loses half. Cut at its
/// first span, trials of half of 66 such workers lasted 50–75 ms, where
/// they had lasted 140–175 ms; cut at its first tick ([`Auto::watch_trial`]),
/// 25 ms.
const DESCENT_CLEAR_LOSS: f64 = 0.25;
/// The size tried right after a trial of half that lost less than
/// [`DESCENT_CLEAR_LOSS`], as a fraction of the size it came from.
const DESCENT_FINE_FACTOR: f64 = 0.75;
/// The size tried right after a doubling that raised throughput, but not
/// enough to keep, as a multiple of the size it came from.
const ASCENT_FACTOR: f64 = 4.0 / 3.0;

/// The trials of other sizes while growth needs proof.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Descent {
    /// The trial under way: the span it started from, the size tried, and
    /// when it began.
    trial: Option<(Probe, usize, Duration)>,
    /// The spans measured at the current size, pooled (the latest
    /// [`DESCENT_SPAN`] or more).
    here: Option<Probe>,
    /// No trial starts before this.
    next_at: Duration,
    /// How long a failed trial holds off the next (0: [`CAP_MEMORY`]).
    memory: Duration,
    /// The size a trial of [`DESCENT_FINE_FACTOR`] of it is due from, at
    /// once: a trial of half of it lost less than [`DESCENT_CLEAR_LOSS`].
    fine: Option<usize>,
    /// The size a trial of [`ASCENT_FACTOR`] times it is due from, at
    /// once: a doubling of it raised throughput, but not enough to keep.
    up: Option<usize>,
    /// The size measured before proof last ended: a pool that grew to
    /// twice it or more while the machine read free is tried at once.
    proven_before: Option<usize>,
    /// The windows since a trial of fewer began, until its first [`TICK`]
    /// is judged ([`Auto::watch_trial`]).
    first: Option<Pending>,
}

impl Descent {
    /// What outlives the end of proof: the wait before the next trial,
    /// and the size measured before proof ended (`proven`, unless one
    /// kept from an earlier end awaits its trial).
    pub(super) fn between_proofs(self, proven: Option<usize>) -> Descent {
        Descent {
            next_at: self.next_at,
            memory: self.memory,
            proven_before: self.proven_before.or(proven),
            ..Descent::default()
        }
    }

    /// Whether a trial may start at `now`.
    pub(super) fn ready(&self, now: Duration) -> bool {
        self.trial.is_none() && now >= self.next_at
    }

    /// Whether a trial under way at `now` keeps growth under proof: for
    /// [`TRIAL_HOLDS_PROOF`] after it began, the machine's reading is the
    /// trial's own doing (a trial of 1 worker from 2 left a core of the
    /// database's idle, proof ended, and backlog growth took the pool to 28).
    pub(super) fn holds_proof(&self, now: Duration) -> bool {
        self.trial
            .is_some_and(|(_, _, began)| now < began + TRIAL_HOLDS_PROOF)
    }

    /// The size on trial, if a trial is under way.
    pub(super) fn size(&self) -> Option<usize> {
        self.trial.map(|(_, size, _)| size)
    }

    /// A doubling of `size` raised throughput, but not enough to keep: the
    /// best size may lie between, so a step of [`ASCENT_FACTOR`] is tried
    /// once the pool is back at `size`.
    pub(super) fn doubling_gained(&mut self, size: usize) {
        self.up = Some(size);
    }
}

impl Auto {
    /// Whether other processes hold enough of the machine for trials of
    /// fewer workers ([`DESCENT_OTHERS`]).
    pub(super) fn others_hold_most(&self) -> bool {
        self.others.value >= DESCENT_OTHERS
    }

    /// Feed a proof span (`span`, measured at a size that held, at `now`)
    /// to the trials. Returns whether the span was a trial's: then it is no
    /// verdict on growth.
    pub(super) fn descend(&mut self, span: Probe, now: Duration) -> bool {
        let tried = |factor: f64| self.clamp(((span.threads as f64) * factor).ceil() as usize);
        let (half, three_quarters) = (tried(DESCENT_FACTOR), tried(DESCENT_FINE_FACTOR));
        let fine = self.proof.descent.fine == Some(span.threads) && three_quarters < span.threads;
        let larger = tried(ASCENT_FACTOR);
        let up = self.proof.descent.up == Some(span.threads) && larger > span.threads;
        let smaller = if fine { three_quarters } else { half };
        // Grown while the machine read free (a moment's flicker let spawns
        // take 16 workers to 76): not what the wait of a failed trial was
        // about.
        let grew = self
            .proof
            .descent
            .proven_before
            .is_some_and(|p| span.threads >= 2 * p);
        let others_hold_most = self.others_hold_most();
        let free_growth = self.free_growth();
        let d = &mut self.proof.descent;
        if let Some((from, size, _)) = d.trial {
            let pooled = pool(d.here.filter(|h| h.threads == span.threads), span);
            d.here = Some(pooled);
            let clear_loss = pooled.throughput < from.throughput * (1.0 - DESCENT_CLEAR_LOSS);
            if pooled.span < DESCENT_SPAN && !clear_loss {
                return true;
            }
            d.trial = None;
            d.first = None;
            let was_fine = d.fine.take().is_some();
            // More workers must raise throughput as a doubling must;
            // fewer must serve as much.
            if pooled.throughput >= from.throughput * gain_needed(free_growth, from.threads, size) {
                if size < from.threads {
                    // Kept: the proven size, and growth past it must wait.
                    d.next_at = now;
                    d.memory = Duration::ZERO;
                    self.proof.tested = false;
                } else {
                    // The next step up follows at once, until one does
                    // not pay; the wait before trials of fewer holds.
                    d.up = Some(size);
                }
                self.proof.base = Some(pooled);
                // A fresh cap, not a confirmed one: its memory does not
                // grow with each step.
                self.forget_cap();
                self.learn_cap(size, now);
            } else {
                self.back_from_trial(from, size, pooled, was_fine || clear_loss);
            }
            return true;
        }
        let here = pool(d.here.filter(|h| h.threads == span.threads), span);
        d.here = Some(here);
        let n = here.threads;
        // No doubling awaits its verdict (a step short of one gets none).
        let proven = self
            .proof
            .base
            .is_none_or(|b| (n as f64) < b.threads as f64 * (1.0 + PROOF_MIN_GROWTH));
        if here.span >= DESCENT_SPAN && others_hold_most && proven && n == self.target && up {
            // Not a trial of fewer workers: the wait before those holds.
            d.trial = Some((here, larger, now));
            d.here = None;
            d.up = None;
            self.proof.move_to = Some(Move {
                size: larger,
                why: "more workers on trial",
                judged: None,
                against: here,
            });
            return false;
        }
        if here.span >= DESCENT_SPAN
            && others_hold_most
            && (now >= d.next_at || fine || grew)
            && proven
            && n == self.target
            && smaller < n
        {
            d.trial = Some((here, smaller, now));
            d.first = Some(Pending::default());
            d.here = None;
            d.proven_before = None;
            d.fine = d.fine.filter(|_| fine);
            // The wait before the next trial, should this one fail or be
            // cut short (the machine left proof while calls that wait on
            // another service were on trial, and they were tried again
            // every 0.3 s). A trial of three quarters is the second half
            // of the one before it: the wait it set holds.
            if !fine {
                d.memory = if d.memory.is_zero() {
                    CAP_MEMORY
                } else {
                    (d.memory * 2).min(MAX_CAP_MEMORY)
                };
            }
            d.next_at = now + d.memory;
            self.proof.move_to = Some(Move {
                size: smaller,
                why: "fewer workers on trial",
                judged: None,
                against: here,
            });
        }
        false
    }

    /// Feed every window to a trial of fewer workers under way: if the
    /// first [`TICK`] since it began (its settling included) serves
    /// [`DESCENT_CLEAR_LOSS`] less than the size it came from, the pool
    /// goes back at once. The workers it let go are still finishing their
    /// tasks then, which can only make the trial read better than it is;
    /// waiting for a settled span kept calls that wait on another service
    /// at half their workers for 75 ms, which held 6–28% of their phase's
    /// requests slower than 12 ms.
    pub(super) fn watch_trial(&mut self, obs: &Observation) {
        let d = &mut self.proof.descent;
        let (Some((from, size, _)), Some(first)) = (d.trial, d.first.as_mut()) else {
            return;
        };
        if size >= from.threads {
            return;
        }
        let Some(window) = first.add(obs, FEEDBACK_MIN_COMPLETIONS, TICK) else {
            return;
        };
        d.first = None;
        if window.throughput < from.throughput * (1.0 - DESCENT_CLEAR_LOSS) {
            d.trial = None;
            d.fine = None;
            self.back_from_trial(from, size, window, true);
            // The settled span the trial was pooling is the smaller size's.
            self.proof.pending = Pending::default();
        }
    }

    /// A trial of `size` from `from` served less (`judged`): back at once
    /// to the size that served more. Three quarters follow unless the trial
    /// was the last step to try (`last`: the finer step itself, or a clear
    /// loss).
    fn back_from_trial(&mut self, from: Probe, size: usize, judged: Probe, last: bool) {
        let d = &mut self.proof.descent;
        if !last && size < from.threads {
            // Between the two: three quarters next, at once.
            d.fine = Some(from.threads);
        }
        d.here = Some(from);
        self.proof.base = Some(from);
        self.proof.tested = true;
        self.proof.move_to = Some(Move {
            size: from.threads,
            why: if size < from.threads {
                "fewer workers served less: back"
            } else {
                "more workers did not pay: back"
            },
            judged: Some(judged),
            against: from,
        });
    }
}

/// `span` pooled with the spans before it at the same size (`before`), the
/// older ones fading so the pool holds about two [`DESCENT_SPAN`]s.
fn pool(before: Option<Probe>, span: Probe) -> Probe {
    let Some(before) = before else {
        return span;
    };
    let keep = before.span.min(DESCENT_SPAN);
    let total = keep + span.span;
    let (a, b) = (keep.as_secs_f64(), span.span.as_secs_f64());
    Probe {
        threads: span.threads,
        throughput: (before.throughput * a + span.throughput * b) / (a + b),
        span: total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool at `size` whose last failed trial holds the next off for a
    /// minute, with proof ended after measuring `proven` and back now, on
    /// a machine others hold; fed a 250 ms span at `size`.
    fn after_a_flicker(proven: usize, size: usize) -> Auto {
        let mut p = Auto::new();
        p.others.value = 0.8;
        p.target = size;
        p.proof.descent = Descent {
            next_at: Duration::from_secs(60),
            memory: CAP_MEMORY,
            ..Descent::default()
        }
        .between_proofs(Some(proven));
        let span = Probe {
            threads: size,
            throughput: 10_000.0,
            span: Duration::from_millis(250),
        };
        p.descend(span, Duration::from_secs(1));
        p
    }

    #[test]
    fn only_a_trial_of_fewer_workers_is_cut_at_its_first_tick() {
        // A first tick at 4,000/s against 10,000/s: a trial of fewer goes
        // back at once. A step up is judged on settled spans, as growth
        // is: its new workers' first tasks carry their start.
        let from = Probe {
            threads: 12,
            throughput: 10_000.0,
            span: Duration::from_millis(250),
        };
        for (size, cut) in [(6, true), (16, false)] {
            let mut p = Auto::new();
            p.proof.descent = Descent {
                trial: Some((from, size, Duration::ZERO)),
                first: Some(Pending::default()),
                ..Descent::default()
            };
            let first_tick = Observation {
                now: TICK,
                window: TICK,
                completions: 100,
                live: size,
                ..Observation::default()
            };
            p.watch_trial(&first_tick);
            assert_eq!(p.proof.descent.size().is_none(), cut, "a trial of {size}");
        }
    }

    #[test]
    fn a_pool_that_doubled_while_proof_was_off_is_tried_at_once() {
        // At 64 connections a moment of free machine let spawning take
        // the pool from 16 workers to 76, where it held for the rest of
        // the phase: the wait was the failed trial's, of another size.
        assert_eq!(after_a_flicker(16, 76).proof.descent.size(), Some(38));
        // Short of a doubling, the wait holds.
        assert_eq!(after_a_flicker(16, 31).proof.descent.size(), None);
    }
}
