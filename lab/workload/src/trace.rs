//! The trace model: an ordered list of tasks, each with its arrival offset and
//! how much of its service time computes and how much blocks.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::limits::secs_saturating;

/// One task of a trace: the unit the replay driver submits.
///
/// Mirrors a line of the thesis's trace format (Xu 2004, table 5-1): request
/// id, application id, start delay relative to the previous task, and
/// execution time, which tidepool splits into compute and blocked parts.
///
/// ```
/// use std::time::Duration;
/// use tidepool_workload::TaskSpec;
/// let t = TaskSpec::new(1, 1, Duration::ZERO, Duration::from_micros(200))
///     .with_split(Duration::from_micros(50), Duration::from_micros(150));
/// assert_eq!(t.exec(), Duration::from_micros(200));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskSpec {
    /// Unique id of the request.
    pub request_id: u64,
    /// Id of the application the request belongs to.
    pub app_id: u64,
    /// Time between the previous task's arrival and this one's (the first
    /// task's delay is measured from the start of the replay).
    pub start_delay: Duration,
    /// Time the task spends computing (a calibrated busy loop).
    pub cpu: Duration,
    /// Time the task spends blocked (sleeping), standing for I/O.
    pub blocked: Duration,
}

impl TaskSpec {
    /// A task that computes for all of its execution time `exec`.
    pub fn new(request_id: u64, app_id: u64, start_delay: Duration, exec: Duration) -> Self {
        Self {
            request_id,
            app_id,
            start_delay,
            cpu: exec,
            blocked: Duration::ZERO,
        }
    }

    /// The same task with its execution time split into `cpu` and `blocked`.
    pub fn with_split(mut self, cpu: Duration, blocked: Duration) -> Self {
        self.cpu = cpu;
        self.blocked = blocked;
        self
    }

    /// Total execution time: `cpu + blocked` (saturating).
    pub fn exec(&self) -> Duration {
        self.cpu.saturating_add(self.blocked)
    }
}

/// An ordered list of tasks plus a name for reports.
///
/// ```
/// use std::time::Duration;
/// use tidepool_workload::{TaskSpec, Trace};
/// let mut trace = Trace::new("tiny");
/// trace.push(TaskSpec::new(1, 1, Duration::ZERO, Duration::from_micros(200)));
/// trace.push(TaskSpec::new(2, 1, Duration::from_micros(300), Duration::from_micros(100)));
/// assert_eq!(trace.len(), 2);
/// assert_eq!(trace.span(), Duration::from_micros(300));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// A short name for reports (file name, generator spec, suite name).
    pub name: String,
    /// The tasks, in arrival order.
    pub tasks: Vec<TaskSpec>,
    /// `Some(n)`: a closed loop of `n` clients. Task `i` belongs to client
    /// `i mod n`, and its start delay is the think time between the answer
    /// to the client's previous task and this task's submission (the first
    /// task of each client: from the start of the replay). `None`: an open
    /// loop, start delays are arrival gaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<usize>,
}

/// Summary numbers of a trace, for reports and sanity checks.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TraceStats {
    /// Number of tasks.
    pub tasks: usize,
    /// Arrival time of the last task, seconds.
    pub span_s: f64,
    /// Mean arrival rate, tasks per second (0 when the span is zero).
    pub arrival_rate: f64,
    /// Mean execution time (cpu + blocked), microseconds.
    pub mean_exec_us: f64,
    /// Mean compute time, microseconds.
    pub mean_cpu_us: f64,
    /// Mean blocked time, microseconds.
    pub mean_blocked_us: f64,
    /// Offered CPU load: total compute time / span, in cores.
    pub offered_cores: f64,
}

impl TraceStats {
    /// The summary of a stream of tasks in arrival order, in one pass and
    /// constant memory.
    ///
    /// ```
    /// use tidepool_workload::{GenSpec, TraceStats};
    /// let spec: GenSpec = "poisson:rate=100,n=50".parse().unwrap();
    /// assert_eq!(TraceStats::of(spec.stream()), spec.generate().stats());
    /// ```
    pub fn of(tasks: impl IntoIterator<Item = TaskSpec>) -> TraceStats {
        let (mut n, mut span, mut cpu, mut blocked) = (0usize, Duration::ZERO, 0.0, 0.0);
        for t in tasks {
            n += 1;
            span = span.saturating_add(t.start_delay);
            cpu += t.cpu.as_secs_f64();
            blocked += t.blocked.as_secs_f64();
        }
        if n == 0 {
            return TraceStats::default();
        }
        TraceStats {
            tasks: n,
            span_s: 0.0,
            arrival_rate: 0.0,
            mean_exec_us: (cpu + blocked) * 1e6 / n as f64,
            mean_cpu_us: cpu * 1e6 / n as f64,
            mean_blocked_us: blocked * 1e6 / n as f64,
            offered_cores: 0.0,
        }
        .with_span(span)
    }

    /// The same numbers over another span (a closed loop's is not the sum of
    /// its delays: see [`Trace::span`]).
    fn with_span(self, span: Duration) -> TraceStats {
        let span_s = span.as_secs_f64();
        let per_s = |x: f64| if span_s > 0.0 { x / span_s } else { 0.0 };
        TraceStats {
            span_s,
            arrival_rate: per_s(self.tasks as f64),
            offered_cores: per_s(self.mean_cpu_us * self.tasks as f64 / 1e6),
            ..self
        }
    }
}

impl Trace {
    /// An empty trace named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            tasks: Vec::new(),
            clients: None,
        }
    }

    /// A trace from a list of tasks.
    pub fn from_tasks(name: impl Into<String>, tasks: Vec<TaskSpec>) -> Self {
        Self {
            name: name.into(),
            tasks,
            clients: None,
        }
    }

    /// Append a task.
    pub fn push(&mut self, task: TaskSpec) {
        self.tasks.push(task);
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when the trace holds no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Arrival offsets from the start of the replay, one per task (the
    /// running sum of the start delays).
    pub fn arrival_offsets(&self) -> Vec<Duration> {
        let mut at = Duration::ZERO;
        self.tasks
            .iter()
            .map(|t| {
                at = at.saturating_add(t.start_delay);
                at
            })
            .collect()
    }

    /// Arrival time of the last task. For a closed loop, the time the
    /// busiest client takes when no task ever waits (its think times plus
    /// its service times): the shortest its replay can be.
    pub fn span(&self) -> Duration {
        match self.clients {
            Some(c) if c > 0 => {
                let mut per_client = vec![Duration::ZERO; c];
                for (i, t) in self.tasks.iter().enumerate() {
                    per_client[i % c] = per_client[i % c]
                        .saturating_add(t.start_delay)
                        .saturating_add(t.exec());
                }
                per_client.into_iter().max().unwrap_or_default()
            }
            _ => self
                .tasks
                .iter()
                .fold(Duration::ZERO, |at, t| at.saturating_add(t.start_delay)),
        }
    }

    /// Summary numbers.
    pub fn stats(&self) -> TraceStats {
        let stats = TraceStats::of(self.tasks.iter().copied());
        match self.clients {
            Some(_) => stats.with_span(self.span()),
            None => stats,
        }
    }

    /// The same trace with every time (delays, compute, blocked) divided by
    /// `speedup` (2.0 replays twice as fast with tasks half as long).
    ///
    /// # Panics
    /// If `speedup` is not finite and positive.
    pub fn scaled(&self, speedup: f64) -> Trace {
        assert!(
            speedup.is_finite() && speedup > 0.0,
            "speedup must be finite and > 0"
        );
        let f = |d: Duration| secs_saturating(d.as_secs_f64() / speedup);
        Trace {
            name: self.name.clone(),
            tasks: self
                .tasks
                .iter()
                .map(|t| TaskSpec {
                    start_delay: f(t.start_delay),
                    cpu: f(t.cpu),
                    blocked: f(t.blocked),
                    ..*t
                })
                .collect(),
            clients: self.clients,
        }
    }

    /// The first `n` tasks (or all of them when there are fewer).
    pub fn truncated(&self, n: usize) -> Trace {
        Trace {
            name: self.name.clone(),
            tasks: self.tasks.iter().take(n).copied().collect(),
            clients: self.clients,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn stats_scaled_truncated() {
        let mut t = Trace::new("t");
        t.push(TaskSpec::new(1, 1, us(0), us(100)));
        t.push(TaskSpec::new(2, 1, us(1000), us(0)).with_split(us(100), us(300)));
        let s = t.stats();
        assert_eq!(s.tasks, 2);
        assert_eq!(s.span_s, 0.001);
        assert_eq!(s.arrival_rate, 2000.0);
        assert_eq!(s.mean_exec_us, 250.0);
        assert_eq!(s.mean_blocked_us, 150.0);
        assert!((s.offered_cores - 0.2).abs() < 1e-12);
        let f = t.scaled(2.0);
        assert_eq!(f.tasks[1].start_delay, us(500));
        assert_eq!(f.tasks[1].blocked, us(150));
        assert_eq!(t.truncated(1).len(), 1);
        assert_eq!(Trace::new("e").stats(), TraceStats::default());
    }

    #[test]
    fn closed_loop_span_is_the_busiest_clients_time() {
        let mut t = Trace::new("c");
        for i in 0..4 {
            t.push(TaskSpec::new(i + 1, 1, us(100), us(50 * (i + 1))));
        }
        t.clients = Some(2);
        // client 0: tasks 0 and 2 (150 + 250), client 1: tasks 1 and 3 (200 + 300)
        assert_eq!(t.span(), us(500));
        assert_eq!(t.truncated(2).clients, Some(2));
    }
}
