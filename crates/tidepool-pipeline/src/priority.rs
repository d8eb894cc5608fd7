//! Per-stage priority scheduling (Roysden 2004): pure policies that turn
//! queue depths into a priority for the stage's own threads.
//!
//! A policy is a small state machine, like tidepool's `SizingPolicy`: it
//! never reads a clock or calls the OS. Each thread of a stage gets its own
//! instance; the thread asks it for a priority when it starts
//! ([`PriorityPolicy::start`]) and every time it conveys a buffer
//! ([`PriorityPolicy::at_convey`], with the depths of its input and output
//! queues), and applies what comes back to itself.
//!
//! Nice values: larger is *lower* priority. "Nice up" (the paper's term)
//! lowers a thread's priority, "nice down" raises it again and needs
//! `CAP_SYS_NICE`; when the OS refuses, the run says so once and goes on.

use std::fmt;

use crate::sys::SchedClass;

/// A thread priority: a scheduling class and a nice value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Priority {
    /// The scheduling class.
    pub class: SchedClass,
    /// The nice value, -20 (highest) … 19 (lowest).
    pub nice: i32,
}

impl Priority {
    /// The default: time-sharing at nice 0.
    pub const DEFAULT: Priority = Priority {
        class: SchedClass::Other,
        nice: 0,
    };

    /// Time-sharing at a nice value (clamped to -20..=19).
    pub fn nice(nice: i32) -> Priority {
        Priority {
            class: SchedClass::Other,
            nice: nice.clamp(-20, 19),
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.class {
            SchedClass::Other => write!(f, "nice {}", self.nice),
            SchedClass::Batch => write!(f, "SCHED_BATCH nice {}", self.nice),
            SchedClass::Idle => f.write_str("SCHED_IDLE"),
        }
    }
}

/// The queue depths a thread sees when it conveys a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Depths {
    /// Buffers waiting in the stage's input queue (for the source: empty
    /// buffers waiting in the free pool).
    pub input: usize,
    /// Buffers in the output queue right after the push, the conveyed one
    /// included (for the last stage: the free pool).
    pub output: usize,
}

/// A per-thread priority controller: depths in, priorities out.
pub trait PriorityPolicy: Send {
    /// The policy's name, as in a [`PrioritySpec`].
    fn name(&self) -> String;
    /// The priority to apply when the thread starts (`None`: leave it).
    fn start(&mut self) -> Option<Priority>;
    /// Called at every convey; a `Some` is applied at once.
    fn at_convey(&mut self, depths: Depths) -> Option<Priority>;
}

/// A fixed priority applied once at start (the paper's fixed scheduling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed(pub Priority);

impl PriorityPolicy for Fixed {
    fn name(&self) -> String {
        PrioritySpec::Fixed(self.0).to_string()
    }
    fn start(&mut self) -> Option<Priority> {
        Some(self.0)
    }
    fn at_convey(&mut self, _: Depths) -> Option<Priority> {
        None
    }
}

/// Roysden's "dynamic up": a thread that sees two or more buffers in its
/// output queue when it conveys (its successor is slower) raises its nice by
/// `step`, once; later backups change nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicUp {
    step: i32,
    raised: bool,
}

impl DynamicUp {
    /// Raise the nice value by `step` on the first backup.
    pub fn new(step: i32) -> Self {
        DynamicUp {
            step,
            raised: false,
        }
    }
}

impl PriorityPolicy for DynamicUp {
    fn name(&self) -> String {
        PrioritySpec::DynamicUp(self.step).to_string()
    }
    fn start(&mut self) -> Option<Priority> {
        None
    }
    fn at_convey(&mut self, d: Depths) -> Option<Priority> {
        if !self.raised && d.output >= 2 {
            self.raised = true;
            return Some(Priority::nice(self.step));
        }
        None
    }
}

/// Roysden's "dynamic up, down": as [`DynamicUp`], and a raised thread that
/// sees no other buffer in its output queue when it conveys lowers its nice
/// back to 0 (which needs `CAP_SYS_NICE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicUpDown {
    step: i32,
    raised: bool,
}

impl DynamicUpDown {
    /// Raise the nice value by `step` on a backup, back to 0 when it clears.
    pub fn new(step: i32) -> Self {
        DynamicUpDown {
            step,
            raised: false,
        }
    }
}

impl PriorityPolicy for DynamicUpDown {
    fn name(&self) -> String {
        PrioritySpec::DynamicUpDown(self.step).to_string()
    }
    fn start(&mut self) -> Option<Priority> {
        None
    }
    fn at_convey(&mut self, d: Depths) -> Option<Priority> {
        if !self.raised && d.output >= 2 {
            self.raised = true;
            Some(Priority::nice(self.step))
        } else if self.raised && d.output <= 1 {
            self.raised = false;
            Some(Priority::DEFAULT)
        } else {
            None
        }
    }
}

/// The rule the paper proposes: a stage whose *input* backs up (two or more
/// buffers waiting) is slower than its predecessor, so it gets a higher
/// priority (nice `-step`); one whose *output* backs up is faster than its
/// successor, so it gets a lower one (nice `+step`). Both or neither: no change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backpressure {
    step: i32,
    current: i32,
}

impl Backpressure {
    /// Move the nice value between `-step`, 0 and `+step`.
    pub fn new(step: i32) -> Self {
        Backpressure { step, current: 0 }
    }
}

impl PriorityPolicy for Backpressure {
    fn name(&self) -> String {
        PrioritySpec::Backpressure(self.step).to_string()
    }
    fn start(&mut self) -> Option<Priority> {
        None
    }
    fn at_convey(&mut self, d: Depths) -> Option<Priority> {
        let want = match (d.input >= 2, d.output >= 2) {
            (true, false) => -self.step,
            (false, true) => self.step,
            _ => self.current,
        };
        (want != self.current).then(|| {
            self.current = want;
            Priority::nice(want)
        })
    }
}

/// A priority policy by name: the form a stage's configuration, the CLI and
/// the benchmarks use. Each thread builds its own instance from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrioritySpec {
    /// `nice:N`, `batch[:N]`, `idle`: a fixed priority.
    Fixed(Priority),
    /// `dynamic-up[:STEP]` (default step 5).
    DynamicUp(i32),
    /// `dynamic-up-down[:STEP]` (default step 5).
    DynamicUpDown(i32),
    /// `backpressure[:STEP]` (default step 5).
    Backpressure(i32),
}

/// The forms [`PrioritySpec::parse`] accepts.
pub const PRIORITY_FORMS: &str =
    "nice:N (N in -20..=19), batch[:N], idle, dynamic-up[:STEP], dynamic-up-down[:STEP], backpressure[:STEP] (STEP in 1..=19)";

impl PrioritySpec {
    /// Parse a spec such as `nice:5`, `idle` or `dynamic-up-down:19`.
    pub fn parse(s: &str) -> Result<PrioritySpec, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let num = |lo: i32, hi: i32, default: Option<i32>| -> Result<i32, String> {
            match arg {
                None => default.ok_or_else(|| format!("`{s}`: `{name}` needs a value")),
                Some(a) => a
                    .parse::<i32>()
                    .ok()
                    .filter(|v| (lo..=hi).contains(v))
                    .ok_or_else(|| format!("`{s}`: `{a}` is not a whole number in {lo}..={hi}")),
            }
        };
        Ok(match name {
            "nice" => PrioritySpec::Fixed(Priority::nice(num(-20, 19, None)?)),
            "batch" => PrioritySpec::Fixed(Priority {
                class: SchedClass::Batch,
                nice: num(-20, 19, Some(0))?,
            }),
            "idle" if arg.is_none() => PrioritySpec::Fixed(Priority {
                class: SchedClass::Idle,
                nice: 0,
            }),
            "dynamic-up" => PrioritySpec::DynamicUp(num(1, 19, Some(5))?),
            "dynamic-up-down" => PrioritySpec::DynamicUpDown(num(1, 19, Some(5))?),
            "backpressure" => PrioritySpec::Backpressure(num(1, 19, Some(5))?),
            _ => return Err(format!("unknown priority `{s}`: expected {PRIORITY_FORMS}")),
        })
    }

    /// A fresh policy instance for one thread.
    pub fn build(&self) -> Box<dyn PriorityPolicy> {
        match *self {
            PrioritySpec::Fixed(p) => Box::new(Fixed(p)),
            PrioritySpec::DynamicUp(s) => Box::new(DynamicUp::new(s)),
            PrioritySpec::DynamicUpDown(s) => Box::new(DynamicUpDown::new(s)),
            PrioritySpec::Backpressure(s) => Box::new(Backpressure::new(s)),
        }
    }
}

impl PrioritySpec {
    /// The policy for a thread whose nice value is `base` when it starts.
    /// The adjusting policies move the thread relative to where it started
    /// (Roysden's "nice up by STEP" is `base + STEP`, "down again" is
    /// `base`), so that in a process already niced, say to 19, they never
    /// *raise* a thread above the others; a fixed priority is absolute.
    pub fn build_from(&self, base: i32) -> Box<dyn PriorityPolicy> {
        match self {
            PrioritySpec::Fixed(_) => self.build(),
            _ => Box::new(FromBase {
                inner: self.build(),
                base,
            }),
        }
    }
}

/// An adjusting policy's priorities, shifted by the thread's starting nice.
struct FromBase {
    inner: Box<dyn PriorityPolicy>,
    base: i32,
}

impl FromBase {
    fn shift(&self, p: Option<Priority>) -> Option<Priority> {
        p.map(|p| Priority {
            nice: (self.base + p.nice).clamp(-20, 19),
            ..p
        })
    }
}

impl PriorityPolicy for FromBase {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn start(&mut self) -> Option<Priority> {
        let p = self.inner.start();
        self.shift(p)
    }
    fn at_convey(&mut self, depths: Depths) -> Option<Priority> {
        let p = self.inner.at_convey(depths);
        self.shift(p)
    }
}

impl fmt::Display for PrioritySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrioritySpec::Fixed(p) => match p.class {
                SchedClass::Other => write!(f, "nice:{}", p.nice),
                SchedClass::Batch => write!(f, "batch:{}", p.nice),
                SchedClass::Idle => f.write_str("idle"),
            },
            PrioritySpec::DynamicUp(s) => write!(f, "dynamic-up:{s}"),
            PrioritySpec::DynamicUpDown(s) => write!(f, "dynamic-up-down:{s}"),
            PrioritySpec::Backpressure(s) => write!(f, "backpressure:{s}"),
        }
    }
}

impl std::str::FromStr for PrioritySpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        PrioritySpec::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(input: usize, output: usize) -> Depths {
        Depths { input, output }
    }

    #[test]
    fn adjusting_policies_move_from_the_threads_starting_nice() {
        let mut p = PrioritySpec::DynamicUpDown(5).build_from(12);
        assert_eq!(p.at_convey(d(0, 2)), Some(Priority::nice(17)));
        assert_eq!(
            p.at_convey(d(0, 1)),
            Some(Priority::nice(12)),
            "back to the start"
        );
        let mut p = PrioritySpec::DynamicUp(5).build_from(19);
        assert_eq!(
            p.at_convey(d(0, 2)),
            Some(Priority::nice(19)),
            "never above 19"
        );
        let mut p = PrioritySpec::Fixed(Priority::nice(3)).build_from(19);
        assert_eq!(
            p.start(),
            Some(Priority::nice(3)),
            "a fixed nice is absolute"
        );
    }

    #[test]
    fn dynamic_up_raises_nice_once_on_two_buffers_in_the_output() {
        let mut p = DynamicUp::new(5);
        assert_eq!(p.start(), None);
        assert_eq!(p.at_convey(d(0, 1)), None, "only its own buffer");
        assert_eq!(p.at_convey(d(0, 2)), Some(Priority::nice(5)));
        assert_eq!(p.at_convey(d(0, 3)), None, "only once");
        assert_eq!(p.at_convey(d(0, 1)), None, "never back down");
    }

    #[test]
    fn dynamic_up_down_returns_when_the_output_clears() {
        let mut p = DynamicUpDown::new(19);
        assert_eq!(p.at_convey(d(5, 1)), None);
        assert_eq!(p.at_convey(d(0, 2)), Some(Priority::nice(19)));
        assert_eq!(p.at_convey(d(0, 2)), None);
        assert_eq!(p.at_convey(d(0, 1)), Some(Priority::DEFAULT));
        assert_eq!(p.at_convey(d(0, 1)), None);
        assert_eq!(p.at_convey(d(0, 4)), Some(Priority::nice(19)));
    }

    #[test]
    fn backpressure_raises_on_input_and_lowers_on_output_backups() {
        let mut p = Backpressure::new(5);
        assert_eq!(p.at_convey(d(1, 1)), None);
        assert_eq!(p.at_convey(d(3, 1)), Some(Priority::nice(-5)));
        assert_eq!(p.at_convey(d(3, 0)), None);
        assert_eq!(p.at_convey(d(3, 3)), None, "both back up: hold");
        assert_eq!(p.at_convey(d(0, 2)), Some(Priority::nice(5)));
        assert_eq!(p.at_convey(d(0, 0)), None, "neither: hold");
    }

    #[test]
    fn fixed_applies_at_start_only() {
        let mut p = Fixed(Priority::nice(19));
        assert_eq!(p.start(), Some(Priority::nice(19)));
        assert_eq!(p.at_convey(d(9, 9)), None);
    }

    #[test]
    fn specs_parse_and_print_back() {
        for s in [
            "nice:5",
            "nice:-3",
            "batch:0",
            "idle",
            "dynamic-up:5",
            "dynamic-up-down:19",
            "backpressure:2",
        ] {
            assert_eq!(PrioritySpec::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            PrioritySpec::parse("dynamic-up").unwrap(),
            PrioritySpec::DynamicUp(5)
        );
        let e = PrioritySpec::parse("nice:20").unwrap_err();
        assert!(e.contains("-20..=19"), "{e}");
        assert!(PrioritySpec::parse("nice").is_err());
        assert!(PrioritySpec::parse("turbo")
            .unwrap_err()
            .contains("expected"));
    }
}
