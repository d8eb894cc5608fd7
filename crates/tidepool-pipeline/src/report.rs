//! The timing report: per thread group, where the time went, and which
//! group limits the pipeline.

use std::time::Duration;

use serde::Serialize;

/// At most this many queue-depth samples are kept per thread; past that,
/// every other one is dropped and sampling slows down by half.
const DEPTH_SAMPLES: usize = 512;

/// The input-queue depth over time, sampled at pops, thinned to stay small.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct DepthSeries {
    pub(crate) points: Vec<(f64, usize)>,
    stride: u64,
    seen: u64,
}

impl DepthSeries {
    pub(crate) fn new() -> Self {
        DepthSeries {
            points: Vec::with_capacity(DEPTH_SAMPLES),
            stride: 1,
            seen: 0,
        }
    }

    pub(crate) fn record(&mut self, t: f64, depth: usize) {
        self.seen += 1;
        if !self.seen.is_multiple_of(self.stride) {
            return;
        }
        if self.points.len() == DEPTH_SAMPLES {
            let kept: Vec<_> = self.points.iter().copied().step_by(2).collect();
            self.points = kept;
            self.stride *= 2;
        }
        self.points.push((t, depth));
    }
}

/// One thread group's numbers (a group runs one stage, or several on the
/// same thread, on one or more threads).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageReport {
    /// The group's name: its stages' names joined by `+`.
    pub name: String,
    /// The pipelines that pass through it.
    pub pipelines: Vec<String>,
    /// Threads that ran it (for a self-sizing stage: the most at once).
    pub threads: usize,
    /// Buffers it conveyed.
    pub items: u64,
    /// Time its stages spent working, summed over threads.
    pub busy: Duration,
    /// Of `busy`, each stage's share, in stage order.
    pub busy_by_stage: Vec<(String, Duration)>,
    /// Time its threads waited for an input buffer.
    pub wait_input: Duration,
    /// Time its threads waited for an empty output slot (only the source
    /// waits: a free buffer from the pool; other pushes never wait).
    pub wait_output: Duration,
    /// CPU time its threads used, if the OS tells.
    pub cpu: Option<Duration>,
    /// Input-queue depth `(seconds since start, buffers waiting)` sampled at
    /// pops (for the source: free buffers).
    pub depth: Vec<(f64, usize)>,
    /// The priority policy its threads ran under.
    pub priority: Option<String>,
    /// For a self-sizing stage, its thread count over time `(seconds, threads)`.
    pub sizes: Vec<(f64, usize)>,
}

impl StageReport {
    /// Busy time per buffer divided by the threads: the group's time per
    /// item, whose inverse is the most items per second it can pass.
    pub fn time_per_item(&self) -> Option<Duration> {
        (self.items > 0).then(|| {
            Duration::from_secs_f64(
                self.busy.as_secs_f64() / self.items as f64 / self.threads.max(1) as f64,
            )
        })
    }

    /// Items per second this group could pass if it never waited.
    pub fn capacity(&self) -> Option<f64> {
        self.time_per_item()
            .map(|t| 1.0 / t.as_secs_f64().max(1e-12))
    }
}

/// One pipeline's totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineReport {
    /// Its name.
    pub name: String,
    /// Rounds its source produced (the empty last buffer of [`crate::Flow::End`]
    /// included).
    pub rounds: u64,
    /// Its buffer pool.
    pub buffers: usize,
    /// Its run was stopped from outside or by its deadline
    /// ([`crate::StopHandle`], [`crate::Builder::deadline`]).
    pub stopped: bool,
}

/// The timing report of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Wall-clock time from the first thread's start to the last's end.
    pub elapsed: Duration,
    /// The pipelines that ran.
    pub pipelines: Vec<PipelineReport>,
    /// Every thread group, sources first, in pipeline order.
    pub stages: Vec<StageReport>,
    /// Notices about the run (a refused priority change, once).
    pub notes: Vec<String>,
    /// Logical CPUs available.
    pub cores: usize,
}

impl Report {
    /// Whether a pipeline of the run was stopped from outside or by its
    /// deadline rather than ended by its source.
    pub fn stopped(&self) -> bool {
        self.pipelines.iter().any(|p| p.stopped)
    }

    /// Rounds per second over the run (all pipelines together).
    pub fn items_per_sec(&self) -> f64 {
        let rounds: u64 = self.pipelines.iter().map(|p| p.rounds).sum();
        rounds as f64 / self.elapsed.as_secs_f64().max(1e-12)
    }

    /// The group with the least capacity: the one that limits the pipeline.
    pub fn limiting(&self) -> Option<&StageReport> {
        self.stages
            .iter()
            .filter(|s| s.capacity().is_some())
            .min_by(|a, b| a.capacity().partial_cmp(&b.capacity()).expect("finite"))
    }

    /// The throughput bound the limiting group implies (its capacity).
    pub fn bound_items_per_sec(&self) -> Option<f64> {
        self.limiting().and_then(StageReport::capacity)
    }

    /// The report as a readable table.
    pub fn to_table(&self) -> String {
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
        let mut out = format!(
            "{:<24} {:>4} {:>8} {:>10} {:>10} {:>10} {:>10} {:>11} {:>12}\n",
            "stage",
            "thr",
            "items",
            "busy ms",
            "wait-in ms",
            "wait-out",
            "cpu ms",
            "µs/item",
            "max items/s"
        );
        for s in &self.stages {
            out += &format!(
                "{:<24} {:>4} {:>8} {:>10} {:>10} {:>10} {:>10} {:>11} {:>12}\n",
                s.name,
                s.threads,
                s.items,
                ms(s.busy),
                ms(s.wait_input),
                ms(s.wait_output),
                s.cpu.map(ms).unwrap_or_else(|| "-".into()),
                s.time_per_item()
                    .map(|t| format!("{:.1}", t.as_secs_f64() * 1e6))
                    .unwrap_or_else(|| "-".into()),
                s.capacity()
                    .map(|c| format!("{c:.0}"))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        out += &format!(
            "\n{} rounds in {:.3} s: {:.0} items/s",
            self.pipelines.iter().map(|p| p.rounds).sum::<u64>(),
            self.elapsed.as_secs_f64(),
            self.items_per_sec()
        );
        if let (Some(l), Some(b)) = (self.limiting(), self.bound_items_per_sec()) {
            out += &format!(
                "; limiting stage `{}` bounds it at {b:.0} items/s ({:.0}% of the bound)",
                l.name,
                100.0 * self.items_per_sec() / b
            );
        }
        out.push('\n');
        for n in &self.notes {
            out += &format!("note: {n}\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, threads: usize, items: u64, busy_ms: u64) -> StageReport {
        StageReport {
            name: name.into(),
            pipelines: vec!["p".into()],
            threads,
            items,
            busy: Duration::from_millis(busy_ms),
            busy_by_stage: vec![],
            wait_input: Duration::ZERO,
            wait_output: Duration::ZERO,
            cpu: None,
            depth: vec![],
            priority: None,
            sizes: vec![],
        }
    }

    #[test]
    fn the_limiting_stage_has_the_least_capacity_per_thread() {
        let r = Report {
            elapsed: Duration::from_secs(1),
            pipelines: vec![PipelineReport {
                name: "p".into(),
                rounds: 100,
                buffers: 4,
                stopped: false,
            }],
            // 100 items: read 1 ms each on 1 thread (1000/s), sort 3 ms on
            // 4 threads (1333/s), write 2 ms on 1 thread (500/s).
            stages: vec![
                stage("read", 1, 100, 100),
                stage("sort", 4, 100, 300),
                stage("write", 1, 100, 200),
            ],
            notes: vec![],
            cores: 2,
        };
        assert_eq!(r.limiting().unwrap().name, "write");
        assert!((r.bound_items_per_sec().unwrap() - 500.0).abs() < 1e-6);
        assert!(r.to_table().contains("limiting stage `write`"));
    }

    #[test]
    fn depth_series_stays_bounded() {
        let mut s = DepthSeries::new();
        for i in 0..100_000 {
            s.record(i as f64, i % 7);
        }
        assert!(s.points.len() <= DEPTH_SAMPLES);
        assert!(s.points.len() >= DEPTH_SAMPLES / 2);
        assert!(s.points.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
