//! The cores as per-core run queues: each core is its own processor-sharing
//! server ([`Cpu`] with one core), a thread computes on the core it landed
//! on, and a core that goes idle pulls one thread from the busiest other
//! core at once (the kernel's newidle balance, `sched_balance_newidle`).
//!
//! A thread's core is chosen when it is woken ([`RunQueues::land`],
//! evenly, as measured: docs/sim.md, session 6) and kept while it runs task
//! after task; a part started with no landing (the replay's driver) lands
//! evenly too.

use crate::cpu::Cpu;

/// Per-core run queues.
#[derive(Debug)]
pub struct RunQueues {
    cpus: Vec<Cpu>,
    /// The core each worker computes on (indexed by worker).
    home: Vec<u32>,
    /// splitmix64 state of the landing picks.
    lands: u64,
    /// The periodic balance's interval (the scheduler tick), ns.
    tick: u64,
    /// When the next periodic balance runs, ns.
    next_tick: u64,
}

impl RunQueues {
    /// `cores` idle cores (at least 1) at time 0.
    pub fn new(cores: usize, tick: u64) -> RunQueues {
        RunQueues {
            cpus: (0..cores.max(1)).map(|_| Cpu::new(1)).collect(),
            home: Vec::new(),
            lands: 0x5EED,
            tick: tick.max(1),
            next_tick: tick.max(1),
        }
    }

    /// The least and the most loaded cores, with their part counts.
    fn extremes(&self) -> ((usize, usize), (usize, usize)) {
        let mut lo = (0, usize::MAX);
        let mut hi = (0, 0);
        for (j, c) in self.cpus.iter().enumerate() {
            let n = c.running();
            if n < lo.1 {
                lo = (j, n);
            }
            if n > hi.1 {
                hi = (j, n);
            }
        }
        (lo, hi)
    }

    /// The periodic balance (at the busy core's tick, nohz idle balance):
    /// parts move from the most to the least loaded core until they differ
    /// by at most one.
    fn periodic(&mut self) {
        loop {
            let ((lo, nl), (hi, nh)) = self.extremes();
            if nh < nl + 2 {
                return;
            }
            self.pull(hi, lo);
        }
    }

    /// Core `to` takes one part of core `from`.
    fn pull(&mut self, from: usize, to: usize) {
        if let Some((w, left)) = self.cpus[from].take_one() {
            if let Some(h) = self.home.get_mut(w as usize) {
                *h = to as u32;
            }
            self.cpus[to].start(w, left);
        }
    }

    fn pick(&mut self) -> usize {
        self.lands = self.lands.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.lands;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % self.cpus.len() as u64) as usize
    }

    /// Worker `w` is woken: it lands on a core, evenly; returns how long
    /// until that core's next compute part ends (0 if it is idle).
    pub fn land(&mut self, w: u32) -> u64 {
        let k = self.pick();
        let i = w as usize;
        if self.home.len() <= i {
            self.home.resize(i + 1, 0);
        }
        self.home[i] = k as u32;
        let at = self.cpus[k].at();
        self.cpus[k].next_done().map_or(0, |t| t.saturating_sub(at))
    }

    /// Let time run to `now` on every core.
    #[inline]
    pub fn advance(&mut self, now: u64) {
        for c in &mut self.cpus {
            c.advance(now);
        }
        if now >= self.next_tick {
            self.periodic();
            self.next_tick = (now / self.tick + 1) * self.tick;
        }
    }

    /// Worker `w` starts `work_ns` of compute on its core (the driver's
    /// parts, which have none, land evenly).
    pub fn start(&mut self, w: u32, work_ns: u64) {
        let k = match self.home.get(w as usize) {
            Some(&k) => k as usize,
            None => {
                let k = self.pick();
                if (w as usize) < (1 << 20) {
                    self.home.resize(w as usize + 1, 0);
                    self.home[w as usize] = k as u32;
                }
                k
            }
        };
        self.cpus[k].start(w, work_ns);
    }

    /// When the next compute part ends on any core.
    #[inline]
    pub fn next_done(&mut self) -> Option<u64> {
        let end = self.cpus.iter_mut().filter_map(Cpu::next_done).min();
        let ((_, nl), (_, nh)) = self.extremes();
        if nh >= nl + 2 {
            // The next tick balances: an event then.
            return Some(end.map_or(self.next_tick, |e| e.min(self.next_tick)));
        }
        end
    }

    /// A worker whose part has ended by now, if any; a core left idle pulls
    /// a part from the busiest core that has more than one.
    pub fn pop_done(&mut self) -> Option<u32> {
        for k in 0..self.cpus.len() {
            if let Some(w) = self.cpus[k].pop_done() {
                if self.cpus[k].running() == 0 {
                    self.balance(k);
                }
                return Some(w);
            }
        }
        None
    }

    /// Newidle balance: idle core `k` pulls one part from the busiest core.
    fn balance(&mut self, k: usize) {
        let (j, n) = self
            .cpus
            .iter()
            .enumerate()
            .map(|(j, c)| (j, c.running()))
            .max_by_key(|&(j, n)| (n, usize::MAX - j))
            .unwrap_or((k, 0));
        if n >= 2 {
            self.pull(j, k);
        }
    }

    /// Compute parts running on all cores.
    #[inline]
    pub fn running(&self) -> usize {
        self.cpus.iter().map(Cpu::running).sum()
    }

    /// Core-ns spent computing so far.
    pub fn busy_ns(&self) -> f64 {
        self.cpus.iter().map(Cpu::busy_ns).sum()
    }

    /// Ns runnable workers spent waiting for their core so far.
    pub fn delay_ns(&self) -> f64 {
        self.cpus.iter().map(Cpu::delay_ns).sum()
    }
}
