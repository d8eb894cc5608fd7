//! Other sizes on trial (module docs of [`super`], point 10). While
//! growth needs proof, the pool may still be larger than the process its
//! tasks wait on can serve: it grew before the machine read busy (a fresh
//! pool met 64 clients and started 74 workers in 70 ms), or a doubling
//! passed on noise. Each worker past what that process serves queues one
//! more request in it, where it waits behind the others and stretches
//! their latency; the throughput does not rise.
//!
//! So, while other processes hold half the machine or more, the pool
//! tries half its size, in five rounds of 50 ms: the size tried, the size
//! it came from, the size tried, and so on, each read right after the
//! switch to it ([`Trial`]). If the median ratio of each round to the one
//! before it says the size tried served at least as many tasks a second,
//! the smaller size becomes the proven size and the learned cap (growth
//! past it proves itself again once the cap expires), and the next trial
//! may follow at once. The machine serves in stretches of its own (lookups
//! at 2 workers read 15,000–25,000/s for 0.3–1 s, then 46,000/s): a trial
//! read against the span before it met a change of stretch as often as
//! not, where a change between two rounds sways one ratio of four.
//! Otherwise the pool goes back to the size it came from at once (as soon
//! as the first round serves a quarter less than the span before the
//! trial: calls that wait on another service lose half their throughput
//! with half the workers, and each tick of a trial queues their requests),
//! and waits before
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

use super::feedback::{gain_needed, Probe};
use super::growth::{Move, PROOF_MIN_GROWTH};
use super::{Auto, CAP_MEMORY, MAX_CAP_MEMORY};

/// The span a trial's throughput and the size it starts from are measured
/// over: longer than a proof span, as the throughput differences it judges
/// are smaller (over 100 ms, trials that lost a tenth of the throughput
/// passed on noise and took the pool down to 7 where 16 served best).
const DESCENT_SPAN: Duration = Duration::from_millis(200);
/// The span each round of a trial is read over ([`Trial`]): a proof span.
const ROUND_SPAN: Duration = Duration::from_millis(50);
/// Rounds of a trial: the size tried, the size it came from, and so on,
/// ending at the size tried; a change of stretch sways one of the four
/// ratios of rounds in a row, and the median holds.
const TRIAL_ROUNDS: usize = 5;
/// How long a trial keeps growth under proof however free the machine
/// reads ([`Descent::holds_proof`]): twice a trial's length.
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
/// they had lasted 140–175 ms.
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
    /// The trial under way.
    trial: Option<Trial>,
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
}

/// A trial of another size: rounds of [`ROUND_SPAN`] at the size tried
/// and the size it came from in turn, [`TRIAL_ROUNDS`] of them starting
/// and ending at the size tried, each read right after the switch to it.
/// The size tried is judged by the median ratio of each round to the one
/// before it: the machine serves in stretches (lookups at 2 workers read
/// 15,000–25,000/s for 0.3–1 s, then 46,000/s), and a change of stretch
/// between two rounds sways one ratio, where it decided a trial read
/// against the span before it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Trial {
    /// The span measured before the trial, at the size it came from.
    from: Probe,
    /// The size tried.
    size: usize,
    /// The size the pool is at for the round under way.
    at: usize,
    /// The round under way, pooled.
    round: Option<Probe>,
    /// The round before it.
    last: Option<Probe>,
    /// ln(tried / came from) of each pair of rounds in a row so far.
    ratios: [f64; TRIAL_ROUNDS - 1],
    /// Rounds done.
    rounds: usize,
    /// The rounds at the size it came from, pooled (for the decision log).
    came_from: Option<Probe>,
    /// When the trial began.
    began: Duration,
}

impl Trial {
    fn new(from: Probe, size: usize, began: Duration) -> Trial {
        Trial {
            from,
            size,
            at: size,
            round: None,
            last: None,
            ratios: [0.0; TRIAL_ROUNDS - 1],
            rounds: 0,
            came_from: None,
            began,
        }
    }
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
    /// database's idle, proof ended, and spawning took the pool to 28).
    pub(super) fn holds_proof(&self, now: Duration) -> bool {
        self.trial
            .is_some_and(|t| now < t.began + TRIAL_HOLDS_PROOF)
    }

    /// The size on trial, if a trial is under way.
    pub(super) fn size(&self) -> Option<usize> {
        self.trial.map(|t| t.at)
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
        if let Some(trial) = d.trial {
            return self.try_size(trial, span, now, free_growth);
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
            d.trial = Some(Trial::new(here, larger, now));
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
            d.trial = Some(Trial::new(here, smaller, now));
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
}

impl Auto {
    /// Feed a proof span to the trial under way (`t`): pool it into the
    /// round, and once the round is long enough switch sizes or judge.
    /// Returns whether the span was the trial's.
    fn try_size(&mut self, mut t: Trial, span: Probe, now: Duration, free_growth: usize) -> bool {
        let moved = self.target != t.at;
        let d = &mut self.proof.descent;
        if moved {
            // The size moved under the trial (a new mix, the hysteresis):
            // the span says nothing of either size, and the trial's wait
            // holds. (The span's mean workers may differ from the size the
            // trial is at while spawned workers start.)
            d.trial = None;
            d.fine = None;
            d.here = None;
            return false;
        }
        let round = pool_round(t.round.take(), span);
        let clear_loss =
            t.rounds == 0 && round.throughput < t.from.throughput * (1.0 - DESCENT_CLEAR_LOSS);
        if clear_loss {
            // Back at once: each tick of it queues requests.
            return self.trial_failed(t, round, t.from, true);
        }
        if round.span < ROUND_SPAN {
            t.round = Some(round);
            d.trial = Some(t);
            return true;
        }
        let from = t.from.threads;
        let at_tried = t.at == t.size;
        if let Some(last) = t.last {
            let (tried, came_from) = if at_tried {
                (round, last)
            } else {
                (last, round)
            };
            t.ratios[t.rounds - 1] = (tried.throughput / came_from.throughput).ln();
        }
        if !at_tried {
            t.came_from = Some(pool_round(t.came_from, round));
        }
        t.rounds += 1;
        if t.rounds < TRIAL_ROUNDS {
            t.last = Some(round);
            t.at = if at_tried { from } else { t.size };
            d.trial = Some(t);
            self.proof.move_to = Some(Move {
                size: t.at,
                why: if at_tried {
                    "back to compare with the trial"
                } else {
                    "the trial again"
                },
                judged: None,
                against: round,
            });
            return true;
        }
        let mut ratios = t.ratios;
        ratios.sort_by(f64::total_cmp);
        let mid = ratios.len() / 2;
        let median = (ratios[mid] + ratios[(ratios.len() - 1) / 2]) / 2.0;
        let against = t.came_from.unwrap_or(t.from);
        let tried = Probe {
            threads: t.size,
            throughput: against.throughput * median.exp(),
            span: round.span,
        };
        d.trial = None;
        let was_fine = d.fine.take().is_some();
        // More workers must raise throughput as a doubling must; fewer
        // must serve as much.
        if tried.throughput < against.throughput * gain_needed(free_growth, from, t.size) {
            let clear = tried.throughput < against.throughput * (1.0 - DESCENT_CLEAR_LOSS);
            return self.trial_failed(t, tried, against, clear || was_fine);
        }
        if t.size < from {
            // Kept: the proven size, and growth past it must wait.
            d.next_at = now;
            d.memory = Duration::ZERO;
            self.proof.tested = false;
        } else {
            // The next step up follows at once, until one does not pay;
            // the wait before trials of fewer holds.
            d.up = Some(t.size);
        }
        d.here = Some(round);
        self.proof.base = Some(round);
        // A fresh cap, not a confirmed one: its memory does not grow with
        // each step.
        self.forget_cap();
        self.learn_cap(t.size, now);
        true
    }

    /// The size tried (`judged`) served less than the size the trial came
    /// from (`against`): back to it at once. A trial of fewer that lost
    /// less than [`DESCENT_CLEAR_LOSS`] is followed by one of three
    /// quarters (`no_finer`: not after a clear loss, nor after that one).
    fn trial_failed(&mut self, t: Trial, judged: Probe, against: Probe, no_finer: bool) -> bool {
        let d = &mut self.proof.descent;
        d.trial = None;
        let was_fine = d.fine.take().is_some();
        if !no_finer && !was_fine && t.size < t.from.threads {
            // Between the two: three quarters next, at once.
            d.fine = Some(t.from.threads);
        }
        d.here = Some(against);
        self.proof.base = Some(against);
        self.proof.tested = true;
        self.proof.move_to = Some(Move {
            size: t.from.threads,
            why: if t.size < t.from.threads {
                "fewer workers served less: back"
            } else {
                "more workers did not pay: back"
            },
            judged: Some(judged),
            against,
        });
        true
    }
}

/// `span` added to the round pooled so far (`round`), at the same size.
fn pool_round(round: Option<Probe>, span: Probe) -> Probe {
    let Some(round) = round else {
        return span;
    };
    let (a, b) = (round.span.as_secs_f64(), span.span.as_secs_f64());
    Probe {
        threads: span.threads,
        throughput: (round.throughput * a + span.throughput * b) / (a + b),
        span: round.span + span.span,
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
    fn a_pool_that_doubled_while_proof_was_off_is_tried_at_once() {
        // At 64 connections a moment of free machine let spawning take
        // the pool from 16 workers to 76, where it held for the rest of
        // the phase: the wait was the failed trial's, of another size.
        assert_eq!(after_a_flicker(16, 76).proof.descent.size(), Some(38));
        // Short of a doubling, the wait holds.
        assert_eq!(after_a_flicker(16, 31).proof.descent.size(), None);
    }
}
