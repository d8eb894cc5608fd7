//! `hill-climb` — the .NET thread pool's hill-climbing controller
//! (`PortableThreadPool.HillClimbing.cs` in dotnet/runtime), the industrial
//! anchor among our policies. Re-implemented from its description, not ported.
//!
//! Every sample interval the controller records the throughput (completions
//! per second) and the thread count in effect. The thread count is the
//! *control setting* plus a square wave (period 4 samples: 2 low, 2 high), so
//! the throughput carries a signal at the wave frequency if threads matter.
//! Over the last whole wave periods (up to 8, i.e. 32 samples) it extracts the
//! wave-frequency component of throughput and thread count with the Goertzel
//! algorithm, estimates noise from the two adjacent frequency bands, and moves
//! the control setting by the real part of
//! `(throughput_wave − bias·thread_wave) / thread_wave` — positive when more
//! threads raise throughput by more than the bias, so it leans toward fewer
//! threads — scaled by a confidence (signal / noise / 3), squared (small moves
//! damped) and limited to 4 threads per second.
//!
//! Constants (all from `CreateHillClimber` in the .NET source): wave period 4,
//! max wave magnitude 20, magnitude multiplier 1.0, history 8 periods, bias
//! (target throughput ratio) 0.15, target signal-to-noise 3.0, max change 4
//! threads/s and 20 per sample, error smoothing 0.01, gain exponent 2.0, max
//! sample error 15%, refuse growth above 95% CPU (`CpuUtilizationHigh`).
//!
//! Differences, forced by purity: .NET draws each sample interval at random in
//! 10..=200 ms to avoid locking onto other periodic activity; a policy has no
//! randomness and a fixed [`Schedule`], so we sample every 100 ms (the middle
//! of that range). A sample with too few completions to be accurate is merged
//! into the next one (as .NET does) by holding. .NET's starvation injection
//! (the gate thread adds a thread when queued work makes no progress) is a
//! tick with work queued, nobody idle and no completion: one thread is added.

use std::time::Duration;

use super::{Decision, Observation, Schedule, SizingPolicy, Trigger};

const WAVE_PERIOD: usize = 4;
const MAX_WAVE_MAGNITUDE: usize = 20;
const WAVE_MAGNITUDE_MULTIPLIER: f64 = 1.0;
const WAVE_HISTORY: usize = 8;
const SAMPLES: usize = WAVE_PERIOD * WAVE_HISTORY;
const BIAS: f64 = 0.15;
const TARGET_SNR: f64 = 3.0;
const MAX_CHANGE_PER_SECOND: f64 = 4.0;
const MAX_CHANGE_PER_SAMPLE: f64 = 20.0;
const ERROR_SMOOTHING: f64 = 0.01;
const GAIN_EXPONENT: f64 = 2.0;
const MAX_SAMPLE_ERROR: f64 = 0.15;
const CPU_HIGH: f64 = 0.95;

/// A complex number, enough for one Goertzel bin.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Complex {
    re: f64,
    im: f64,
}

impl Complex {
    fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }
    fn scale(self, k: f64) -> Complex {
        Complex {
            re: self.re * k,
            im: self.im * k,
        }
    }
    fn sub(self, o: Complex) -> Complex {
        Complex {
            re: self.re - o.re,
            im: self.im - o.im,
        }
    }
    fn div(self, o: Complex) -> Complex {
        let d = o.re * o.re + o.im * o.im;
        Complex {
            re: (self.re * o.re + self.im * o.im) / d,
            im: (self.im * o.re - self.re * o.im) / d,
        }
    }
}

/// The .NET thread pool's hill-climbing concurrency controller.
#[derive(Debug, Clone, PartialEq)]
pub struct HillClimb {
    control: f64,
    last_count: usize,
    total_samples: u64,
    avg_noise: f64,
    throughputs: [f64; SAMPLES],
    counts: [f64; SAMPLES],
    pending_completions: u64,
    pending_secs: f64,
}

impl HillClimb {
    /// The sample interval (fixed: see the module docs).
    pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
    /// Keep-alive of workers above the target: short, so that the low half of
    /// the square wave really removes threads.
    pub const KEEP_ALIVE: Duration = Duration::from_millis(20);

    /// A controller that takes its starting point from the pool at start.
    pub fn new() -> Self {
        HillClimb {
            control: 0.0,
            last_count: 0,
            total_samples: 0,
            avg_noise: 0.0,
            throughputs: [0.0; SAMPLES],
            counts: [0.0; SAMPLES],
            pending_completions: 0,
            pending_secs: 0.0,
        }
    }

    /// The control setting: the thread count the wave oscillates above.
    pub fn control_setting(&self) -> f64 {
        self.control
    }

    /// Samples recorded so far.
    pub fn samples(&self) -> u64 {
        self.total_samples
    }

    /// Someone (the pool's clamp, a user `resize`, starvation) set the count:
    /// shift the control setting by as much, as .NET's `ForceChange` does.
    fn force(&mut self, count: usize) {
        if count != self.last_count {
            self.control += count as f64 - self.last_count as f64;
            self.last_count = count;
        }
    }

    /// The wave-frequency component of the last `n` entries of `ring`.
    fn wave_component(&self, ring: &[f64; SAMPLES], n: usize, period: f64) -> Complex {
        let w = 2.0 * std::f64::consts::PI / period;
        let (sin, cos) = w.sin_cos();
        let coeff = 2.0 * cos;
        let (mut q1, mut q2) = (0.0, 0.0);
        let first = self.total_samples - n as u64;
        for k in 0..n as u64 {
            let x = ring[((first + k) % SAMPLES as u64) as usize];
            let q0 = coeff * q1 - q2 + x;
            q2 = q1;
            q1 = q0;
        }
        Complex {
            re: q1 - q2 * cos,
            im: q2 * sin,
        }
        .scale(1.0 / n as f64)
    }

    /// The signed move suggested by the history, before the gain: the real
    /// part of the throughput/thread ratio times the confidence.
    fn measure(&mut self) -> f64 {
        // Whole wave periods only, so the wave falls in one Fourier band; the
        // newest sample is left out as in .NET (it may straddle a change).
        let usable = (self.total_samples - 1).min(SAMPLES as u64) as usize;
        let n = usable / WAVE_PERIOD * WAVE_PERIOD;
        if n <= WAVE_PERIOD {
            return 0.0;
        }
        let mean = |ring: &[f64; SAMPLES]| -> f64 {
            let first = self.total_samples - n as u64;
            (0..n as u64)
                .map(|k| ring[((first + k) % SAMPLES as u64) as usize])
                .sum::<f64>()
                / n as f64
        };
        let (avg_tp, avg_threads) = (mean(&self.throughputs), mean(&self.counts));
        if avg_tp <= 0.0 || avg_threads <= 0.0 {
            return 0.0;
        }
        let period = WAVE_PERIOD as f64;
        let bands = n as f64 / period;
        let adjacent1 = n as f64 / (bands + 1.0);
        let adjacent2 = n as f64 / (bands - 1.0);
        let tp_wave = self
            .wave_component(&self.throughputs, n, period)
            .scale(1.0 / avg_tp);
        let mut noise = self
            .wave_component(&self.throughputs, n, adjacent1)
            .scale(1.0 / avg_tp)
            .abs();
        if adjacent2 <= n as f64 {
            noise = noise.max(
                self.wave_component(&self.throughputs, n, adjacent2)
                    .scale(1.0 / avg_tp)
                    .abs(),
            );
        }
        let thread_wave = self
            .wave_component(&self.counts, n, period)
            .scale(1.0 / avg_threads);

        self.avg_noise = if self.avg_noise == 0.0 {
            noise
        } else {
            ERROR_SMOOTHING * noise + (1.0 - ERROR_SMOOTHING) * self.avg_noise
        };
        // Normalised magnitudes: below this the "wave" is rounding residue of
        // a constant series, and a ratio of residues would be noise.
        let ratio = if thread_wave.abs() > 1e-9 {
            tp_wave.sub(thread_wave.scale(BIAS)).div(thread_wave).re
        } else {
            0.0
        };
        let noise_for_confidence = self.avg_noise.max(noise);
        let confidence = if noise_for_confidence > 0.0 {
            thread_wave.abs() / noise_for_confidence / TARGET_SNR
        } else {
            1.0
        };
        ratio.clamp(-1.0, 1.0) * confidence.clamp(0.0, 1.0)
    }
}

impl Default for HillClimb {
    fn default() -> Self {
        HillClimb::new()
    }
}

/// The workers' CPU use over the window as a fraction of all cores.
fn worker_cpu_utilization(obs: &Observation) -> Option<f64> {
    let cpu = obs.worker_cpu_time?.as_secs_f64();
    let capacity = obs.window.as_secs_f64() * obs.cores.max(1) as f64;
    (capacity > 0.0).then(|| cpu / capacity)
}

impl SizingPolicy for HillClimb {
    fn name(&self) -> &str {
        "hill-climb"
    }

    fn schedule(&self) -> Schedule {
        Schedule {
            every: Some(Self::SAMPLE_INTERVAL),
            ..Schedule::default()
        }
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        let min = obs.min.max(1);
        let max = obs.max.max(min);
        match obs.trigger {
            Trigger::Start => {
                // .NET starts at its minimum, one thread per core.
                let start = obs.target.max(obs.cores).clamp(min, max);
                self.control = start as f64;
                self.last_count = start;
                Decision {
                    target: Some(start),
                    keep_alive: Some(Self::KEEP_ALIVE),
                    grow_on_demand: Some(false),
                    reason: "hill-climb: start".into(),
                    ..Decision::default()
                }
            }
            Trigger::Tick => self.sample(obs, min, max),
            _ => Decision::hold(),
        }
    }
}

impl HillClimb {
    fn sample(&mut self, obs: &Observation, min: usize, max: usize) -> Decision {
        let current = obs.target.max(1);
        self.force(current);

        if obs.completions == 0 && obs.queue_len > 0 && obs.idle == 0 && current < max {
            self.force(current + 1);
            return Decision::resize(current + 1, "hill-climb: starvation");
        }

        let secs = obs.window.as_secs_f64() + self.pending_secs;
        let completions = obs.completions + self.pending_completions;
        if secs <= 0.0 {
            return Decision::hold();
        }
        // Completions are counted at task end, so each sample is off by up to
        // (threads − 1) tasks; wait for enough of them to keep that under 15%.
        let error = if completions == 0 {
            if current > 1 {
                f64::INFINITY
            } else {
                0.0
            }
        } else {
            (current as f64 - 1.0) / completions as f64
        };
        if self.total_samples > 0 && error >= MAX_SAMPLE_ERROR {
            self.pending_secs = secs;
            self.pending_completions = completions;
            return Decision::hold();
        }
        self.pending_secs = 0.0;
        self.pending_completions = 0;

        let slot = (self.total_samples % SAMPLES as u64) as usize;
        self.throughputs[slot] = completions as f64 / secs;
        // The count in effect, not the one asked for: if the pool could not
        // follow the wave (busy workers finish their tasks first), there is no
        // thread signal and so no move, rather than a phantom one.
        self.counts[slot] = if obs.live > 0 { obs.live } else { current } as f64;
        self.total_samples += 1;

        let signal = self.measure();
        let gain = MAX_CHANGE_PER_SECOND * secs;
        let mut step = signal.abs().powf(GAIN_EXPONENT).copysign(signal) * gain;
        step = step.min(MAX_CHANGE_PER_SAMPLE);
        if step > 0.0 && worker_cpu_utilization(obs).is_some_and(|u| u > CPU_HIGH) {
            step = 0.0;
        }
        self.control += step;

        let magnitude = (0.5
            + self.control * self.avg_noise * TARGET_SNR * WAVE_MAGNITUDE_MULTIPLIER * 2.0)
            as usize;
        let magnitude = magnitude.clamp(1, MAX_WAVE_MAGNITUDE);
        self.control = self
            .control
            .min(max.saturating_sub(magnitude) as f64)
            .max(min as f64);

        let high = (self.total_samples / (WAVE_PERIOD as u64 / 2)) % 2 == 1;
        let wave = if high { magnitude } else { 0 };
        let count = (self.control as usize + wave).clamp(min, max);
        self.last_count = count;
        Decision::resize(
            count,
            format!(
                "hill-climb: control {:.2} {:+.3} wave {wave}",
                self.control, step
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(100);

    /// Drives the controller against a synthetic throughput curve (tasks per
    /// second as a function of the thread count) and returns the control
    /// setting after each sample.
    fn climb(
        p: &mut HillClimb,
        start: usize,
        samples: usize,
        curve: impl Fn(usize) -> f64,
    ) -> Vec<f64> {
        let mut target = p
            .decide(&Observation {
                target: start,
                min: 1,
                max: 100,
                cores: 2,
                ..Observation::default()
            })
            .target
            .unwrap();
        let mut trace = Vec::new();
        for _ in 0..samples {
            let obs = Observation {
                trigger: Trigger::Tick,
                window: TICK,
                completions: (curve(target) * TICK.as_secs_f64()).round() as u64,
                target,
                live: target,
                min: 1,
                max: 100,
                cores: 2,
                ..Observation::default()
            };
            if let Some(t) = p.decide(&obs).target {
                target = t.clamp(1, 100);
            }
            trace.push(p.control_setting());
        }
        trace
    }

    /// Throughput grows linearly up to 20 threads, then falls off.
    fn peak_at_20(n: usize) -> f64 {
        let n = n as f64;
        if n <= 20.0 {
            1000.0 * n
        } else {
            (20_000.0 - 300.0 * (n - 20.0)).max(1000.0)
        }
    }

    #[test]
    fn climbs_toward_the_better_thread_count() {
        let mut p = HillClimb::new();
        let trace = climb(&mut p, 4, 600, peak_at_20);
        let end = *trace.last().unwrap();
        assert!((17.0..=23.0).contains(&end), "control ended at {end}");
    }

    #[test]
    fn descends_from_too_many_threads() {
        let mut p = HillClimb::new();
        let trace = climb(&mut p, 60, 600, peak_at_20);
        let end = *trace.last().unwrap();
        assert!((17.0..=23.0).contains(&end), "control ended at {end}");
    }

    #[test]
    fn flat_curve_drifts_down_not_up() {
        // Threads do not matter: the bias toward fewer threads wins.
        let mut p = HillClimb::new();
        let trace = climb(&mut p, 30, 600, |_| 5000.0);
        assert!(*trace.last().unwrap() < 27.0, "{}", trace.last().unwrap());
    }

    #[test]
    fn respects_the_rate_limit() {
        let mut p = HillClimb::new();
        let trace = climb(&mut p, 2, 300, |n| 1000.0 * n as f64);
        let limit = MAX_CHANGE_PER_SECOND * TICK.as_secs_f64() + 1e-9;
        for w in trace.windows(2) {
            assert!(
                (w[1] - w[0]).abs() <= limit,
                "moved {} in one sample",
                w[1] - w[0]
            );
        }
        // 300 samples = 30 s: at most 4 threads per second on average.
        assert!(trace.last().unwrap() - 2.0 <= 4.0 * 30.0 + 1e-6);
        assert!(
            *trace.last().unwrap() > 10.0,
            "it should climb a rising curve"
        );
    }

    #[test]
    fn square_wave_perturbs_the_count() {
        let mut p = HillClimb::new();
        p.decide(&Observation {
            target: 8,
            min: 1,
            max: 100,
            ..Observation::default()
        });
        let mut targets = Vec::new();
        let mut target = 8;
        for _ in 0..8 {
            let obs = Observation {
                trigger: Trigger::Tick,
                window: TICK,
                completions: 500,
                target,
                min: 1,
                max: 100,
                ..Observation::default()
            };
            target = p.decide(&obs).target.unwrap();
            targets.push(target);
        }
        // Two low, two high, repeating (flat throughput: control barely moves).
        assert_eq!(targets[0], targets[3]);
        assert_eq!(targets[1], targets[2]);
        assert_eq!(targets[1], targets[0] + 1);
    }

    #[test]
    fn a_wave_the_pool_cannot_follow_moves_nothing() {
        // The pool keeps 6 workers whatever the target (all busy): the
        // throughput cannot respond, and the controller must not drift.
        let mut p = HillClimb::new();
        p.decide(&Observation {
            target: 6,
            min: 1,
            max: 100,
            ..Observation::default()
        });
        let mut target = 6;
        for _ in 0..200 {
            let obs = Observation {
                trigger: Trigger::Tick,
                window: TICK,
                completions: 600,
                target,
                live: 6,
                min: 1,
                max: 100,
                ..Observation::default()
            };
            target = p.decide(&obs).target.unwrap();
        }
        assert_eq!(p.control_setting(), 6.0);
    }

    #[test]
    fn starts_at_one_thread_per_core() {
        let d = HillClimb::new().decide(&Observation {
            target: 1,
            min: 1,
            max: 100,
            cores: 8,
            ..Observation::default()
        });
        assert_eq!(d.target, Some(8));
    }

    #[test]
    fn refuses_to_grow_at_high_cpu() {
        let mut hot = HillClimb::new();
        let mut cool = HillClimb::new();
        let run = |p: &mut HillClimb, cpu: Duration| {
            let mut target = 4;
            p.decide(&Observation {
                target,
                min: 1,
                max: 100,
                cores: 2,
                ..Observation::default()
            });
            for _ in 0..100 {
                let obs = Observation {
                    trigger: Trigger::Tick,
                    window: TICK,
                    completions: 100 * target as u64,
                    target,
                    min: 1,
                    max: 100,
                    cores: 2,
                    worker_cpu_time: Some(cpu),
                    ..Observation::default()
                };
                target = p.decide(&obs).target.unwrap();
            }
            p.control_setting()
        };
        let hot_end = run(&mut hot, Duration::from_millis(199));
        let cool_end = run(&mut cool, Duration::from_millis(20));
        assert!(hot_end <= 4.0, "grew to {hot_end} at 99.5% CPU");
        assert!(cool_end > 6.0, "should grow at 10% CPU, got {cool_end}");
    }

    #[test]
    fn starvation_adds_a_thread() {
        let mut p = HillClimb::new();
        p.decide(&Observation {
            target: 4,
            min: 1,
            max: 100,
            ..Observation::default()
        });
        let obs = Observation {
            trigger: Trigger::Tick,
            window: TICK,
            completions: 0,
            queue_len: 10,
            idle: 0,
            target: 4,
            min: 1,
            max: 100,
            ..Observation::default()
        };
        assert_eq!(p.decide(&obs).target, Some(5));
        assert_eq!(p.control_setting(), 5.0);
    }

    #[test]
    fn too_few_completions_are_accumulated() {
        let mut p = HillClimb::new();
        p.decide(&Observation {
            target: 10,
            min: 1,
            max: 100,
            ..Observation::default()
        });
        let obs = |completions| Observation {
            trigger: Trigger::Tick,
            window: TICK,
            completions,
            target: 10,
            min: 1,
            max: 100,
            ..Observation::default()
        };
        assert!(p.decide(&obs(1000)).target.is_some());
        // 9 / 20 = 45% error: wait for more.
        assert!(p.decide(&obs(20)).is_hold());
        assert_eq!(p.samples(), 1);
        // 9 / (20 + 60) < 15%: a sample of 80 tasks over 0.2 s.
        assert!(p.decide(&obs(60)).target.is_some());
        assert_eq!(p.samples(), 2);
        assert_eq!(p.throughputs[1], 400.0);
    }
}
