//! Deferred wake-ups: a stage thread does not wake a parked consumer while
//! every core is already busy with the run's stage threads.
//!
//! # Why
//!
//! A thread-per-stage pipeline usually has more threads than cores. If
//! every push into a queue with a parked consumer wakes it, each item costs
//! every stage a futex wake-up and a context switch, the stages run in
//! lockstep, and a core sometimes idles between a wake-up and the switch.
//! When every core is busy, waking the consumer cannot make anything run
//! sooner: it only takes a core from a thread that had work. So the push
//! leaves the wake-up *owed*, the producer keeps running, and the owed
//! consumer is woken when a core frees up — it then drains a batch, and the
//! context switches amortise over several items. When a core is free, the
//! push wakes at once, as before (no latency is lost on an idle machine).
//! This is the pool's own rule ("never wake more workers than cores")
//! applied to stage threads.
//!
//! # Protocol (why no owed wake-up is ever lost)
//!
//! `running` counts the run's *counted* threads (the stage and source
//! threads; not a self-sizing stage's dispatcher or pool workers) that may
//! hold a core: each counts itself at start, and leaves the count while it
//! waits in a queue, while it runs user code that blocks (see below), and
//! for good when its work ends (before its cleanup).
//!
//! A push by a counted thread into a queue with a waiter, while
//! `running >= cores`, does not notify: under the queue's lock it adds one
//! to the queue's `owed` count; if that count was zero it registers the
//! queue as a *debtor* of the run (a list under its own lock, and the
//! `debtors` counter, a `SeqCst` read-modify-write); then, after a
//! `SeqCst` fence, it loads `running` once more and, if it is now below
//! `cores`, pays every debt itself. A thread leaving the count decrements
//! `running` (`SeqCst` read-modify-write, then a `SeqCst` fence) and, if
//! the result is below `cores` and `debtors` (`SeqCst` load) is non-zero,
//! pays every debt. Paying takes the whole debtor list and, for each
//! queue, zeroes `owed` under its lock and wakes that many waiters.
//!
//! **Wake-ups counted ahead.** A queue also counts the wake-ups it has
//! issued and that no returning waiter has taken yet (`notified`). A push
//! wakes (or owes) only while `waiters > notified + owed`: a waiter with a
//! wake-up on its way needs no second one (that used to cost a futex call
//! per push). Each issued wake-up — a push's or a payment's — is counted in
//! `running` at once, on the woken thread's behalf, so pushes made before
//! it gets a core already see that core taken. The first waiter to return
//! takes one (whichever waiter it was meant for): a counted thread that had
//! left resumes without counting itself again; a thread that is not
//! counted gives the count back as a leaving thread would. Since waiters
//! take them as they return, `notified ≤ waiters` always; a payment issues
//! at most `waiters − notified` (a waiter owed a wake-up may have been
//! woken since, by the end of the stream: a wake-up issued to nobody would
//! stay counted forever, and the `loom` model found exactly that).
//!
//! By the `SeqCst` total order, of a registration and a decrement below
//! `cores`, the later one sees the earlier: either the leaving thread sees
//! the debtor, or the pusher sees the count below `cores`; both may pay, and
//! the second finds nothing left. So an owed wake-up stays owed only while
//! at least `cores` counted threads run outside any wait; each of them
//! leaves the count when it waits, blocks in user code or ends, and it must
//! eventually wait or end because the buffers are finite (a thread that
//! fills every buffer then waits for a free one). The last of them to leave
//! below `cores` pays. An owed wake-up whose waiter has meanwhile been woken
//! otherwise is a spurious notify, which waiters tolerate. Abort and the
//! end-of-stream pop notify at once, never owed.
//!
//! **Paying ahead.** A counted thread that pops the last buffer of its
//! input will wait after that buffer, so it pays every debt right then
//! rather than when it leaves: a virtual CPU that went idle takes tens of
//! microseconds to run a woken thread, and paid on leaving, that latency
//! left the core idle (`docs/notebook/pipelines.md`). Paying
//! early only ever removes debts, so the argument above is unchanged.
//!
//! **The stall bound.** The argument above needs every counted thread to
//! wait, block or end eventually *while the owed consumer sleeps*; user
//! code that busy-waits for a later stage's progress (through a side
//! channel: a flag, a spin on an atomic — `tests/spinwait.rs`) breaks it:
//! with `cores` such threads running, the wake-up the later stage needs is
//! owed, and nobody ever leaves to pay it (a hang).
//! Such code is legal and works with plain threads, so the framework bounds
//! it: a waiter waits at most [`STALL`] at a time, and one that times out
//! while its queue holds buffers and owes a wake-up takes that wake-up
//! itself (under the queue's lock: `owed` down by one, as a payment would
//! have done, and the thread counts itself again as any returning counted
//! waiter does). An owed wake-up therefore costs at most `STALL` of
//! latency, never a hang; on the normal path nothing changes (a timed
//! futex wait costs the same as an untimed one, and a parked thread wakes
//! by itself at most 1/`STALL` times a second).
//!
//! **User code that blocks.** A thread blocked inside a stage (a read, a
//! sleep) holds no core, but the count cannot see that. So each counted
//! thread samples its voluntary context switches around each of its
//! stages' user code (one call in [`SAMPLE`] per stage, cheap against the
//! call); a stage whose sampled calls mostly switch is *blocking*, and its
//! thread leaves the count around every call of it. A stage starts as
//! blocking (nothing deferred across it until two samples show otherwise);
//! where the OS gives no switch count, it stays so. It takes two samples
//! in a row to change a stage's kind: on a loaded machine a short sleep can
//! end while its thread waits for a core, with no voluntary switch at all
//! (a 50 µs sleep read as computing once in about 150 runs of a test at
//! load 5, and its stage ran 16 calls in the computing class). A stage misjudged as
//! computing (it blocks on a few calls only) costs time, never a wake-up:
//! its thread still leaves the count when it waits in a queue or ends.

#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicUsize, Ordering::SeqCst};

#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicUsize, Ordering::SeqCst};

use std::sync::Arc;

use crate::sync::{lock, Mutex};

/// The longest a waiter sleeps before it looks for a stalled owed wake-up
/// itself (the stall bound in the protocol).
pub(crate) const STALL: std::time::Duration = std::time::Duration::from_millis(10);

/// A user call in this many is sampled for voluntary switches.
pub(crate) const SAMPLE: u32 = 16;

/// A queue that owes wake-ups to its waiters: [`Running`] pays them.
pub(crate) trait Debtor: Send + Sync {
    /// Issue every wake-up owed.
    fn pay(&self);
}

/// The run's count of running stage threads and its owed wake-ups.
pub(crate) struct Running {
    running: AtomicUsize,
    cores: usize,
    debtors: AtomicUsize,
    list: Mutex<Vec<Arc<dyn Debtor>>>,
}

#[cfg(not(loom))]
std::thread_local!(static COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
#[cfg(loom)]
loom::thread_local!(static COUNTED: std::cell::Cell<bool> = std::cell::Cell::new(false));

/// The calling thread is a counted one and holds a core (see the protocol).
pub(crate) fn counted() -> bool {
    COUNTED.with(|c| c.get())
}

impl Running {
    /// No thread counted yet; defer only while `cores` of them run.
    pub(crate) fn new(cores: usize) -> Self {
        Running {
            running: AtomicUsize::new(0),
            cores: cores.max(1),
            debtors: AtomicUsize::new(0),
            list: Mutex::new(Vec::new()),
        }
    }

    /// The calling thread starts (or resumes) running: count it.
    pub(crate) fn enter(&self) {
        COUNTED.with(|c| c.set(true));
        self.running.fetch_add(1, SeqCst);
    }

    /// Threads counted now (precounted wake-ups included).
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.running.load(SeqCst)
    }

    /// `n` waiters are being woken: count them now, on their behalf, so
    /// that pushes before they run see the cores they will take.
    pub(crate) fn precount(&self, n: usize) {
        if n > 0 {
            self.running.fetch_add(n, SeqCst);
        }
    }

    /// A counted thread woken with a precounted wake-up runs again.
    pub(crate) fn resume(&self) {
        COUNTED.with(|c| c.set(true));
    }

    /// A precounted wake-up was taken by a thread that is not counted:
    /// give it back (as a leaving thread would).
    pub(crate) fn unprecount(&self) {
        self.release();
    }

    /// The calling thread stops holding a core (it waits, blocks or ends):
    /// uncount it, and pay every debt if a core is now free.
    pub(crate) fn leave(&self) {
        COUNTED.with(|c| c.set(false));
        self.release();
    }

    /// One less in the count; pay every debt if a core is now free.
    fn release(&self) {
        let now = self.running.fetch_sub(1, SeqCst) - 1;
        // Orders the decrement before the load below against `owe`'s pair
        // (a no-op after a `SeqCst` read-modify-write on real hardware;
        // loom needs it to see the total order).
        fence(SeqCst);
        if now < self.cores && self.debtors.load(SeqCst) > 0 {
            self.pay();
        }
    }

    /// Should a push by the calling thread leave its wake-up owed?
    pub(crate) fn defer(&self) -> bool {
        counted() && self.running.load(SeqCst) >= self.cores
    }

    /// `q`'s owed count went from zero to one: register it, and pay at once
    /// if a core has freed since the push decided to defer.
    pub(crate) fn owe(&self, q: Arc<dyn Debtor>) {
        {
            let mut l = lock(&self.list);
            l.push(q);
            self.debtors.fetch_add(1, SeqCst);
        }
        fence(SeqCst);
        if self.running.load(SeqCst) < self.cores {
            self.pay();
        }
    }

    /// The calling thread is about to wait (it took its input's last
    /// buffer): pay every debt now rather than when it leaves, so that a
    /// woken thread's wake-up — tens of microseconds for a virtual CPU
    /// that went idle — overlaps the caller's last buffer instead of
    /// leaving a core idle (see the protocol).
    pub(crate) fn pay_ahead(&self) {
        if self.debtors.load(SeqCst) > 0 {
            self.pay();
        }
    }

    /// Wake every owed waiter.
    pub(crate) fn pay(&self) {
        let owed = {
            let mut l = lock(&self.list);
            let owed = std::mem::take(&mut *l);
            self.debtors.fetch_sub(owed.len(), SeqCst);
            owed
        };
        for q in owed {
            q.pay();
        }
    }
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("running", &self.running.load(SeqCst))
            .field("cores", &self.cores)
            .field("debtors", &self.debtors.load(SeqCst))
            .finish()
    }
}

/// Whether the calling thread's user code blocks (see the protocol).
#[derive(Debug)]
pub(crate) struct Blocking {
    calls: u32,
    /// 0..=3; blocking from 2 up; each sample moves it by one, so from
    /// either end it takes two in a row to change the kind.
    score: u8,
}

impl Default for Blocking {
    fn default() -> Self {
        Blocking { calls: 0, score: 3 }
    }
}

impl Blocking {
    /// The thread's user code blocks, as far as the samples show.
    pub(crate) fn blocks(&self) -> bool {
        self.score >= 2
    }

    /// Before a user call: the switch count if this call is sampled.
    pub(crate) fn before(&mut self) -> Option<u64> {
        self.calls = self.calls.wrapping_add(1);
        if self.calls % SAMPLE == 1 {
            crate::sys::voluntary_switches()
        } else {
            None
        }
    }

    /// After a user call sampled by [`Blocking::before`].
    pub(crate) fn after(&mut self, before: Option<u64>) {
        let (Some(a), Some(b)) = (
            before,
            before.and_then(|_| crate::sys::voluntary_switches()),
        ) else {
            return;
        };
        if b > a {
            self.score = (self.score + 1).min(3);
        } else {
            self.score = self.score.saturating_sub(1);
        }
    }
}

#[cfg(all(test, not(loom), target_os = "linux"))]
mod tests {
    use super::*;

    /// One sample does not change a stage's kind; two in a row do.
    #[test]
    fn it_takes_two_samples_in_a_row_to_change_the_kind() {
        let mut b = Blocking::default();
        let sample = |b: &mut Blocking| {
            // Sampled calls are one in SAMPLE: run a whole period.
            for _ in 0..SAMPLE {
                let s = b.before();
                std::hint::black_box(0u64);
                b.after(s);
            }
        };
        if crate::sys::voluntary_switches().is_none() {
            return; // no switch count here: stages stay blocking
        }
        sample(&mut b);
        assert!(b.blocks(), "one computing sample made the stage computing");
        sample(&mut b);
        assert!(!b.blocks(), "two computing samples did not");
    }

    /// Sampled calls that sleep make a thread blocking; calls that only
    /// compute (however often the kernel preempts them: involuntary
    /// switches do not count) make it computing again. Four sampled sleeps,
    /// so one that ends while its thread waits for a core (no voluntary
    /// switch) does not decide.
    #[test]
    fn sleeping_calls_block_and_computing_calls_do_not() {
        let mut b = Blocking::default();
        assert!(b.blocks(), "nothing deferred before a sample");
        let call = |b: &mut Blocking, f: &dyn Fn()| {
            let s = b.before();
            f();
            b.after(s);
        };
        let compute = || {
            let mut x = 1u64;
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        };
        for _ in 0..2 * SAMPLE {
            call(&mut b, &compute);
        }
        assert!(!b.blocks());
        for _ in 0..4 * SAMPLE {
            call(&mut b, &|| {
                std::thread::sleep(std::time::Duration::from_micros(50))
            });
        }
        assert!(b.blocks());
    }
}
