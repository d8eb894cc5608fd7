//! The pool's control rules as pure functions of plain values: how its size
//! changes, how a [`Decision`](crate::policy::Decision) is applied, and when
//! the policy is called.
//!
//! Nothing here reads a clock, sleeps, locks, spawns or touches an atomic:
//! time comes in as `now: Duration` (since the pool started), events come in
//! as values. The pool's threads call these functions — its compare-and-swap
//! loops over `(live, target)` call [`Sizes`]' transitions, its controller
//! thread calls [`apply`] and [`Scheduler`] — and a discrete-event simulator
//! calls the same ones in virtual time, so the two cannot drift apart.
//!
//! | file | one idea |
//! |---|---|
//! | `sizes.rs` | [`Sizes`]: the `(live, target)` transitions (reserve, release surplus, keep-alive expiry, raise target to live) |
//! | `apply.rs` | [`Limits`] and [`apply`]: a decision's new bounds, keep-alive, growth and slice settings, and its clamped target |
//! | `schedule.rs` | [`Scheduler`]: the periodic tick, the events and their priority, the at-max throttle |
//! | `observe.rs` | [`observation`]: the policy's [`Observation`](crate::policy::Observation) from the state now and the window's statistics |
//! | `starve.rs` | [`wants_worker`]: whether a task that woke nobody tries to spawn a worker |
//! | `wake.rs` | [`holds_wake_up`]: whether a submit skips its wake-up while a woken worker is on its way |
//!
//! This module is public only with the `sim-hooks` feature (which
//! `tidepool-sim` enables); without it the pool alone calls these rules, so
//! what only a simulator needs is allowed to go unused.
//!
//! A simulator drives them like the pool's controller does:
//!
//! ```
//! # #[cfg(feature = "sim-hooks")] {
//! use std::time::Duration;
//! use tidepool::control::{apply, Events, Limits, Next, Scheduler, Sizes};
//! use tidepool::policy::{Fixed, Observation, SizingPolicy, Trigger};
//!
//! let mut policy = Fixed::new(4);
//! let mut limits = Limits {
//!     min: 1,
//!     max: 8,
//!     spawn_limit: None,
//!     keep_alive: Duration::from_secs(1),
//!     grow_on_demand: false,
//!     worker_slice: None,
//! };
//! let mut sizes = Sizes::new(0, 1);
//! let now = Duration::ZERO;
//!
//! // The first call, then grow to the target it set.
//! let mut start = Observation::default();
//! start.trigger = Trigger::Start;
//! let decision = policy.decide(&start);
//! let applied = apply(&decision, &limits, sizes.target);
//! limits = applied.limits;
//! sizes = sizes.with_target(applied.target);
//! while let Some(next) = sizes.reserve(sizes.target) {
//!     sizes = next; // ...and start a worker
//! }
//! assert_eq!(sizes, Sizes::new(4, 4));
//!
//! // Later calls: when the scheduler says so.
//! let mut scheduler = Scheduler::new(policy.schedule(), now);
//! let mut events = Events::default();
//! assert!(scheduler.is_idle()); // `fixed` is never called again
//! assert_eq!(scheduler.next(&mut events, Duration::from_secs(60)), Next::Wait);
//! # }
//! ```
#![cfg_attr(not(feature = "sim-hooks"), allow(dead_code, unused_imports))]

mod apply;
mod observe;
mod schedule;
mod sizes;
mod starve;
mod wake;

pub use apply::{
    apply, effective_spawn_limit, valid_bounds, Applied, Limits, MAX_KEEP_ALIVE, MAX_THREADS,
};
pub use observe::observation;
pub use schedule::{Call, Events, Next, Scheduler, AT_MAX_INTERVAL};
pub use sizes::Sizes;
pub use starve::wants_worker;
pub use wake::{holds_wake_up, ARRIVAL_GRACE};
