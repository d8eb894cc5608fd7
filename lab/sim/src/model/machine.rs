//! The modelled machine's side of a thread: whether one made runnable waits
//! for a core (the scheduler's slice, or preemption), and a task's
//! compute/sleep slices on the cores.

use std::cmp::Reverse;

use super::{Sim, State};
use crate::events::{self, Event};

impl Sim {
    /// A thread becomes runnable. With `preempt`, if every core computes it
    /// waits in `pending` for a core to free, at most `preempt`. With
    /// `slice`, as measured on this machine (docs/notebook/sim.md): it
    /// lands on one of the cores, evenly, whether or not another is idle
    /// (`wait_probe`: 44–68% of hand-offs are woken on the driver's CPU);
    /// if a compute part runs there it waits for that part to end, at most
    /// a slice (EEVDF's RUN_TO_PARITY keeps the running thread from
    /// wake-up preemption for its slice), and no idle core pulls it
    /// sooner. Otherwise (or with neither cost) it goes on at once.
    #[inline(always)]
    pub(super) fn handle(&mut self, e: Event) {
        if self.contended && self.core_wait && !matches!(e, Event::KeepAlive(_)) {
            let running = self.cpu.running();
            let wait = if self.preempt > 0 {
                if running >= self.cores {
                    self.preempt
                } else {
                    0
                }
            } else {
                self.landing_wait()
            };
            if wait > 0 {
                let k = events::key(&mut self.pending_seq, self.now + wait, e);
                self.pending.push(Reverse(k));
                return;
            }
        }
        self.proceed(e);
    }

    /// How long a thread made runnable now waits for the core it lands on
    /// (the slice's rule of [`handle`](Self::handle)).
    #[inline]
    pub(super) fn landing_wait(&mut self) -> u64 {
        let running = self.cpu.running();
        let k = self.land() % running.max(self.cores) as u64;
        if (k as usize) < running {
            self.cpu.left(k as usize).min(self.slice)
        } else {
            0
        }
    }

    /// The next pick of [`handle`](Self::handle)'s core (splitmix64).
    #[inline]
    pub(super) fn land(&mut self) -> u64 {
        self.lands = self.lands.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.lands;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// With `preempt`, run pending threads, the earliest due first, while a
    /// core is free (with `slice` a thread waits for its own core's part;
    /// the caller tests `preempt`: a call per event was 2–4% of a run).
    #[inline]
    pub(super) fn release_pending(&mut self) {
        while !self.pending.is_empty() && self.cpu.running() < self.cores {
            if let Some(Reverse(k)) = self.pending.pop() {
                self.proceed(Event::unpack(k as u64));
            }
        }
    }

    /// Start the current slice of `w`'s task; false if the task completed.
    #[inline(always)]
    pub(super) fn begin_slice(&mut self, w: u32) -> bool {
        loop {
            // By reference: the record is ~100 bytes, a slice reads 40.
            let Some(run) = &self.workers[w as usize].run else {
                return false;
            };
            let (mut c, b) = run.slice();
            if b > 0 {
                c += self.sleep_cpu;
            }
            if run.done == 0 {
                c += run.lead;
            }
            if c > 0 {
                self.workers[w as usize].state = State::Computing;
                self.cpu.start(w, c);
                return true;
            }
            if b > 0 {
                self.block(w, b);
                return true;
            }
            if !self.next_slice(w) {
                return false;
            }
        }
    }

    #[inline(always)]
    pub(super) fn block(&mut self, w: u32, b: u64) {
        self.workers[w as usize].state = State::Blocked;
        self.calendar
            .push_unblocked(self.now + b + self.oversleep, w);
    }

    /// The current slice is over: true if another follows, else the task
    /// completes (bookkeeping only).
    #[inline(always)]
    pub(super) fn next_slice(&mut self, w: u32) -> bool {
        let worker = &mut self.workers[w as usize];
        let Some(run) = &mut worker.run else {
            return false;
        };
        run.done += 1;
        if run.done < run.slices {
            return true;
        }
        let run = *run;
        worker.run = None;
        self.complete(run);
        false
    }

    #[inline(always)]
    pub(super) fn compute_done(&mut self, w: u32) {
        let Some(run) = &self.workers[w as usize].run else {
            return;
        };
        let (_, b) = run.slice();
        if b > 0 {
            self.block(w, b);
        } else {
            self.slice_done(w);
        }
    }

    #[inline(always)]
    pub(super) fn slice_done(&mut self, w: u32) {
        if self.next_slice(w) && self.begin_slice(w) {
            return;
        }
        if self.per_request {
            self.leave(w);
        } else {
            self.run_worker(w, false);
        }
    }
}
