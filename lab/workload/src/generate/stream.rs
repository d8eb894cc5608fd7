//! Generating a spec's tasks lazily: the arrival offsets from their own
//! random stream, the service times from another.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::{split_free, Arrivals, GenSpec, RenewalKind};
use crate::dist::{Dist, Sampler};
use crate::limits::{secs_saturating, MAX_TIME};
use crate::trace::TaskSpec;

impl GenSpec {
    /// The same tasks as [`generate`](Self::generate), one at a time: memory
    /// stays constant however many tasks the spec asks for (the simulator
    /// runs ten million this way).
    ///
    /// ```
    /// use tidepool_workload::GenSpec;
    /// let spec: GenSpec = "onoff:rate=3000,off_rate=50,n=500,free=20,seed=4".parse().unwrap();
    /// assert_eq!(spec.stream().collect::<Vec<_>>(), spec.generate().tasks);
    /// ```
    pub fn stream(&self) -> TaskStream {
        TaskStream {
            spec: self.clone(),
            service: self.service.sampler(),
            arrivals: ArrivalStream::new(&self.arrivals, self.n, self.seed),
            svc_rng: StdRng::seed_from_u64(self.seed ^ 0x9E37_79B9_7F4A_7C15),
            prev: Duration::ZERO,
            index: 0,
        }
    }
}

/// The tasks of a [`GenSpec`], generated lazily ([`GenSpec::stream`]).
#[derive(Debug)]
pub struct TaskStream {
    spec: GenSpec,
    service: Sampler,
    arrivals: ArrivalStream,
    svc_rng: StdRng,
    prev: Duration,
    index: u64,
}

impl Iterator for TaskStream {
    type Item = TaskSpec;

    fn next(&mut self) -> Option<TaskSpec> {
        let at = self.arrivals.next()?;
        let exec = self.service.sample(&mut self.svc_rng);
        let free = match self.spec.free_after {
            Some(after) if self.in_second_half(at) => after,
            _ => self.spec.free,
        };
        let (cpu, blocked) = split_free(exec, free);
        let i = self.index;
        self.index += 1;
        let task = TaskSpec {
            request_id: i + 1,
            // (No division for one application: a stream of millions.)
            app_id: if self.spec.apps <= 1 {
                1
            } else {
                i % self.spec.apps + 1
            },
            start_delay: at.saturating_sub(self.prev),
            cpu,
            blocked,
        };
        self.prev = at;
        Some(task)
    }
}

impl TaskStream {
    /// Whether the next task belongs to the second half (`free_after`): by
    /// count where the spec fixes it (`n` tasks), by time for `steps`.
    fn in_second_half(&self, at: Duration) -> bool {
        match self.spec.arrivals {
            Arrivals::Steps {
                steps, step_time, ..
            } => at >= step_time.saturating_mul(steps) / 2,
            _ => self.index >= self.spec.n.div_ceil(2) as u64,
        }
    }
}

/// Arrival offsets, drawn one at a time from the arrivals' own random stream.
/// A closed loop's offsets are its think times summed, so that the task
/// stream's differences give each think time back.
#[derive(Debug)]
struct ArrivalStream {
    arrivals: Arrivals,
    rng: StdRng,
    /// Tasks still to give (renewal, on/off and closed; unbounded for steps).
    left: usize,
    /// Renewal and closed: the last offset; `None` before the first.
    at: Option<Duration>,
    /// Renewal: the distribution of the gaps, once built.
    gap: Option<Sampler>,
    /// Steps: the current step and the next arrival in seconds.
    step: u32,
    t: Option<f64>,
    /// On/off: which phase (even: on, odd: off), where it starts, and
    /// whether the very first arrival is still to come.
    phase: u64,
    phase_start: f64,
    first: bool,
}

fn exp_gap(rate: f64, rng: &mut StdRng) -> f64 {
    Dist::exp(secs_saturating(1.0 / rate))
        .sample(rng)
        .as_secs_f64()
}

impl ArrivalStream {
    fn new(arrivals: &Arrivals, n: usize, seed: u64) -> ArrivalStream {
        ArrivalStream {
            arrivals: *arrivals,
            rng: StdRng::seed_from_u64(seed),
            left: n,
            at: None,
            gap: None,
            step: 0,
            t: None,
            phase: 0,
            phase_start: 0.0,
            first: true,
        }
    }

    fn next(&mut self) -> Option<Duration> {
        match self.arrivals {
            Arrivals::Renewal { name, rate, cv } => {
                if self.left == 0 {
                    return None;
                }
                self.left -= 1;
                let at = match self.at {
                    None => Duration::ZERO,
                    Some(prev) => {
                        // The gap's distribution, built once (it is the
                        // same for every arrival).
                        let gap = *self.gap.get_or_insert_with(|| {
                            let mean = secs_saturating(1.0 / rate);
                            let sd = secs_saturating(cv / rate);
                            match name {
                                RenewalKind::Poisson => Dist::Exp { mean },
                                RenewalKind::Periodic => Dist::Const { value: mean },
                                RenewalKind::Normal => Dist::Normal { mean, sd },
                                RenewalKind::LogNormal => Dist::LogNormal { mean, sd },
                            }
                            .sampler()
                        });
                        prev.saturating_add(gap.sample(&mut self.rng)).min(MAX_TIME)
                    }
                };
                self.at = Some(at);
                Some(at)
            }
            Arrivals::Closed { think, .. } => {
                if self.left == 0 {
                    return None;
                }
                self.left -= 1;
                let at = self
                    .at
                    .unwrap_or(Duration::ZERO)
                    .saturating_add(think.sample(&mut self.rng))
                    .min(MAX_TIME);
                self.at = Some(at);
                Some(at)
            }
            Arrivals::Steps {
                rate,
                step_pct,
                steps,
                step_time,
            } => {
                let len = step_time.as_secs_f64();
                while self.step < steps {
                    let k = self.step;
                    let r = rate * (1.0 + k as f64 * step_pct / 100.0);
                    if r.is_nan() || r <= 0.0 {
                        // A step whose rate fell to zero holds no task.
                        self.step += 1;
                        continue;
                    }
                    let end = (k + 1) as f64 * len;
                    let t = match self.t {
                        Some(t) => t,
                        None => {
                            k as f64 * len
                                + if k == 0 {
                                    0.0
                                } else {
                                    exp_gap(r, &mut self.rng)
                                }
                        }
                    };
                    if t < end {
                        self.t = Some(t + exp_gap(r, &mut self.rng));
                        return Some(secs_saturating(t));
                    }
                    self.step += 1;
                    self.t = None;
                }
                None
            }
            Arrivals::OnOff {
                rate,
                off_rate,
                on,
                off,
            } => {
                if self.left == 0 {
                    return None;
                }
                let (on, off) = (on.as_secs_f64(), off.as_secs_f64());
                if !(rate > 0.0 && on > 0.0 || off_rate > 0.0 && off > 0.0) {
                    return None; // no phase ever holds a task
                }
                loop {
                    let (r, len) = if self.phase.is_multiple_of(2) {
                        (rate, on)
                    } else {
                        (off_rate, off)
                    };
                    if r <= 0.0 || len <= 0.0 {
                        self.phase_start += len;
                        self.phase += 1;
                        self.t = None;
                        continue;
                    }
                    let end = self.phase_start + len;
                    let t = match self.t {
                        Some(t) => t,
                        None => {
                            let first = std::mem::replace(&mut self.first, false);
                            self.phase_start
                                + if first {
                                    0.0
                                } else {
                                    exp_gap(r, &mut self.rng)
                                }
                        }
                    };
                    if t < end {
                        self.left -= 1;
                        // The generator drew the next gap only while tasks
                        // were still wanted: so does the stream.
                        self.t = if self.left > 0 {
                            Some(t + exp_gap(r, &mut self.rng))
                        } else {
                            None
                        };
                        return Some(secs_saturating(t));
                    }
                    self.phase_start = end;
                    self.phase += 1;
                    self.t = None;
                }
            }
        }
    }
}
