//! Where a task's wait (submit → start) goes in the *real* replay: the
//! measurement behind the measured costs of `docs/sim.md`, "Agreement
//! with the real pool".
//!
//! ```text
//! cargo build --release -p tidepool-sim --example wait_probe
//! nice -n -19 target/release/examples/wait_probe cpu 0.5 16 [records.csv]
//! #                                          workload scale fixed size
//! ```
//!
//! It replays the suite workload against a `fixed` pool through a wrapper
//! executor (the replay itself is unchanged) that stamps, per task: at the
//! submit, the time, the driver's CPU and the system's runnable threads
//! (`/proc/loadavg`'s running count, the driver included); at the start, the
//! time, the worker's CPU and its thread's scheduler counters
//! (`/proc/thread-self/schedstat`: time on a CPU, time runnable but waiting
//! for one, times scheduled in); at the finish, the same counters again.
//! Between a worker's previous finish and its next start the counters say
//! how long it waited for a core (`run delay`) and how much CPU it spent in
//! the pool (`on-CPU`: spin, yields, park, wake-up).
//!
//! Each task is classed by what its worker was doing at the submit:
//! `busy` (still running its previous task: the task queued behind work),
//! `spin` (finished less than 20 µs before: spinning or yielding),
//! `parked` (idle longer: parked, so the submit woke it), `first` (the
//! thread's first task). The probes cost the driver one `pread` and the
//! worker two per task (~1–2 µs each), so the run is slightly slower than an
//! unprobed one; compare its mean wait with the sweep's.

#[cfg(target_os = "linux")]
fn main() {
    probe::main()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("wait_probe reads /proc: Linux only");
    std::process::exit(2);
}

#[cfg(target_os = "linux")]
mod probe {
    use std::cell::RefCell;
    use std::fs::File;
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use tidepool::policy::PolicySpec;
    use tidepool::SubmitError;
    use tidepool_workload::run::{build_pool, Bounds};
    use tidepool_workload::{
        load_workload, replay_with, Executor, ExecutorCounts, Job, ReplayHooks, ReplayOptions,
    };

    /// A thread's CPU time (from the clock: schedstat's own figure lags by
    /// up to a tick for a running thread), time runnable but not running,
    /// and times scheduled in (ns, ns, count).
    #[derive(Clone, Copy, Default)]
    struct Sched {
        on_cpu: u64,
        run_delay: u64,
        slices: u64,
    }

    /// Reads a /proc file again with one `pread` per call.
    struct ProcFile(File);

    impl ProcFile {
        fn open(path: &str) -> ProcFile {
            ProcFile(File::open(path).unwrap_or_else(|e| {
                eprintln!("{path}: {e}");
                std::process::exit(1)
            }))
        }
        /// [`numbers_in`] of the file's current text.
        fn numbers(&self) -> Vec<u64> {
            let mut buf = [0u8; 128];
            let n = self.0.read_at(&mut buf, 0).unwrap_or(0);
            numbers_in(std::str::from_utf8(&buf[..n]).unwrap_or(""))
        }
    }

    /// The whole-number fields of `text` (others read as 0), split at blanks
    /// and '/'.
    fn numbers_in(text: &str) -> Vec<u64> {
        text.split(|c: char| c.is_whitespace() || c == '/')
            .filter(|f| !f.is_empty())
            .map(|f| f.parse().unwrap_or(0))
            .collect()
    }

    thread_local! {
        /// This worker's schedstat file, id, and its last finish.
        static WORKER: RefCell<Option<(ProcFile, u32, u64, Sched)>> = const { RefCell::new(None) };
    }

    fn sched(f: &ProcFile) -> Sched {
        let v = f.numbers();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Sched {
            on_cpu: tidepool::sys::thread_cpu_time().map_or(0, |d| d.as_nanos() as u64),
            run_delay: at(1),
            slices: at(2),
        }
    }

    fn cpu() -> i32 {
        // SAFETY: no arguments; returns the CPU or -1.
        unsafe { libc::sched_getcpu() }
    }

    /// One task's probes.
    #[derive(Clone, Copy, Default)]
    struct Rec {
        submit: u64,
        driver_cpu: i32,
        running: u64,
        computing: u64,
        start: u64,
        worker_cpu: i32,
        worker: u32,
        /// The worker's previous finish (0: none) and the counters' change
        /// from then to this start.
        prev_finish: u64,
        d_run_delay: u64,
        d_on_cpu: u64,
        d_slices: u64,
        /// The body's own CPU (start to finish, thread CPU time), and the
        /// trace's compute and sleeps of the task.
        body_cpu: u64,
        cpu: u64,
        sleeps: u64,
        /// The body's run delay (runnable, no core) and its finish, and the
        /// trace's blocked time.
        body_run_delay: u64,
        finish: u64,
        blocked: u64,
    }

    /// What the wrapped jobs share with the probe.
    struct Shared {
        epoch: Instant,
        threads: AtomicU64,
        /// Tasks started and not finished.
        computing: AtomicU64,
        recs: Mutex<Vec<Rec>>,
    }

    impl Shared {
        fn now(&self) -> u64 {
            self.epoch.elapsed().as_nanos() as u64
        }
    }

    struct Probe<'a> {
        inner: &'a dyn Executor,
        loadavg: ProcFile,
        next: AtomicU64,
        shared: Arc<Shared>,
    }

    impl Executor for Probe<'_> {
        fn name(&self) -> String {
            self.inner.name()
        }
        fn counts(&self) -> ExecutorCounts {
            self.inner.counts()
        }
        fn wait_idle(&self) {
            self.inner.wait_idle()
        }
        fn execute_job(&self, job: Job) -> Result<(), SubmitError> {
            let i = self.next.fetch_add(1, Ordering::Relaxed) as usize;
            let me = Arc::clone(&self.shared);
            // "a b c R/T pid": R, the threads runnable now.
            let running = self.loadavg.numbers().get(3).copied().unwrap_or(0);
            let rec = Rec {
                submit: me.now(),
                driver_cpu: cpu(),
                running,
                computing: me.computing.load(Ordering::Relaxed),
                ..Rec::default()
            };
            {
                let mut r = me.recs.lock().unwrap();
                if r.len() <= i {
                    r.resize(i + 1, Rec::default());
                }
                r[i] = rec;
            }
            self.inner.execute_job(Box::new(move || {
                let start = me.now();
                let worker_cpu = cpu();
                me.computing.fetch_add(1, Ordering::Relaxed);
                WORKER.with(|w| {
                    let mut w = w.borrow_mut();
                    let (file, id, prev, s0) = w.get_or_insert_with(|| {
                        let id = me.threads.fetch_add(1, Ordering::Relaxed) as u32;
                        let f = ProcFile::open("/proc/thread-self/schedstat");
                        let s = sched(&f);
                        (f, id, 0, s)
                    });
                    let s = sched(file);
                    let mut r = me.recs.lock().unwrap();
                    let r = &mut r[i];
                    r.start = start;
                    r.worker_cpu = worker_cpu;
                    r.worker = *id;
                    r.prev_finish = *prev;
                    r.d_run_delay = s.run_delay - s0.run_delay;
                    r.d_on_cpu = s.on_cpu - s0.on_cpu;
                    r.d_slices = s.slices - s0.slices;
                    *s0 = s;
                });
                job();
                me.computing.fetch_sub(1, Ordering::Relaxed);
                WORKER.with(|w| {
                    if let Some((file, _, prev, s0)) = w.borrow_mut().as_mut() {
                        *prev = me.now();
                        let s = sched(file);
                        let mut r = me.recs.lock().unwrap();
                        r[i].body_cpu = s.on_cpu - s0.on_cpu;
                        r[i].body_run_delay = s.run_delay - s0.run_delay;
                        r[i].finish = *prev;
                        *s0 = s;
                    }
                });
            }))
        }
    }

    /// CPU time so far (ns): the process, its main thread (the replay's
    /// driver), and the pool's workers (every other live thread: the
    /// sampler has exited when the replay returns, and its time is in the
    /// process's).
    struct Accounts {
        process: u64,
        driver: u64,
        workers: u64,
    }

    impl Accounts {
        fn now() -> Accounts {
            let pid = std::process::id().to_string();
            let (mut driver, mut workers) = (0, 0);
            for e in std::fs::read_dir("/proc/self/task")
                .into_iter()
                .flatten()
                .flatten()
            {
                let tid = e.file_name().to_string_lossy().into_owned();
                let on_cpu = std::fs::read_to_string(e.path().join("schedstat"))
                    .ok()
                    .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
                    .unwrap_or(0);
                if tid == pid {
                    driver = on_cpu;
                } else {
                    workers += on_cpu;
                }
            }
            let process = tidepool::sys::process_cpu_time().map_or(0, |d| d.as_nanos() as u64);
            Accounts {
                process,
                driver,
                workers,
            }
        }
    }

    fn pct(v: &mut [u64], q: f64) -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_unstable();
        let k = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
        v[k] as f64 / 1e3
    }

    fn mean(v: &[u64]) -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e3
    }

    fn class(r: &Rec) -> &'static str {
        if r.prev_finish == 0 {
            "first"
        } else if r.prev_finish > r.submit {
            "busy"
        } else if r.submit - r.prev_finish < 20_000 {
            "spin"
        } else {
            "parked"
        }
    }

    fn row(label: &str, rs: &[&Rec]) {
        let mut w: Vec<u64> = rs.iter().map(|r| r.start - r.submit).collect();
        let rd: Vec<u64> = rs.iter().map(|r| r.d_run_delay).collect();
        let oc: Vec<u64> = rs.iter().map(|r| r.d_on_cpu).collect();
        let same = rs.iter().filter(|r| r.worker_cpu == r.driver_cpu).count();
        let m = mean(&w);
        println!(
            "| {label} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0}% |",
            rs.len(),
            m,
            pct(&mut w, 0.5),
            pct(&mut w, 0.9),
            pct(&mut w, 0.99),
            mean(&rd),
            mean(&oc),
            100.0 * same as f64 / rs.len().max(1) as f64
        );
    }

    pub fn main() {
        let a: Vec<String> = std::env::args().collect();
        if a.len() < 4 {
            eprintln!("usage: wait_probe WORKLOAD SCALE SIZE [records.csv]");
            std::process::exit(2);
        }
        let scale: f64 = a[2].parse().expect("SCALE: a number");
        let size: usize = a[3].parse().expect("SIZE: a whole number");
        let trace = load_workload(&a[1], scale).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
        let pool = build_pool(&PolicySpec::Fixed(size), &Bounds::default())
            .expect("fixed is a pool")
            .expect("pool builds");
        let probe = Probe {
            inner: &pool,
            loadavg: ProcFile::open("/proc/loadavg"),
            next: AtomicU64::new(0),
            shared: Arc::new(Shared {
                epoch: Instant::now(),
                threads: AtomicU64::new(0),
                computing: AtomicU64::new(0),
                recs: Mutex::new(Vec::new()),
            }),
        };
        let load0 = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        // Calibrate the busy loop now, so its CPU is not in the accounts.
        let _ = tidepool_workload::BusyLoop::global();
        let before = Accounts::now();
        let r = replay_with(
            &trace,
            &probe,
            &ReplayOptions {
                keep_records: true,
                ..ReplayOptions::default()
            },
            ReplayHooks::default(),
        );
        let after = Accounts::now();
        let mut recs = probe.shared.recs.lock().unwrap().clone();
        // The replay's records are in submit order too: name each task.
        let by_id: std::collections::HashMap<u64, &tidepool_workload::TaskSpec> =
            trace.tasks.iter().map(|t| (t.request_id, t)).collect();
        for (rec, tr) in recs.iter_mut().zip(&r.records) {
            if let Some(t) = by_id.get(&tr.request_id) {
                let body = tidepool_workload::TaskBody::of(t);
                rec.cpu = body.cpu.as_nanos() as u64;
                rec.sleeps = if body.blocked.is_zero() {
                    0
                } else {
                    u64::from(body.slices)
                };
                rec.blocked = body.blocked.as_nanos() as u64;
            }
        }
        println!(
            "{} scale {} fixed:{}: {} tasks, mean wait {:.1} µs (the replay's), turnaround {:.1} µs, loadavg before: {}",
            a[1],
            scale,
            size,
            r.completed,
            r.mean_wait_us,
            r.mean_turnaround_us,
            load0.trim()
        );
        // The first 10% are warm-up (threads starting).
        let steady: Vec<&Rec> = recs[recs.len() / 10..]
            .iter()
            .filter(|r| r.start > 0)
            .collect();
        println!("\n| class | tasks | mean wait µs | p50 | p90 | p99 | run delay µs (mean) | on-CPU between tasks µs | worker on the driver's CPU |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for c in ["parked", "spin", "busy", "first"] {
            let rs: Vec<&Rec> = steady.iter().copied().filter(|r| class(r) == c).collect();
            if !rs.is_empty() {
                row(c, &rs);
            }
        }
        row("all", &steady);
        println!("\nparked tasks by runnable threads at the submit (loadavg, driver included) and by CPU:");
        let parked: Vec<&Rec> = steady
            .iter()
            .copied()
            .filter(|r| class(r) == "parked")
            .collect();
        // Parked tasks by a count at the submit, its top bucket open-ended.
        let by_count = |head: &str, low: u64, top: u64, count: fn(&Rec) -> u64| {
            println!("\n| {head} | tasks | mean wait µs | p50 | p90 | p99 | run delay µs (mean) | on-CPU between tasks µs | worker on the driver's CPU |");
            println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
            for k in low..=top {
                let rs: Vec<&Rec> = parked
                    .iter()
                    .copied()
                    .filter(|r| count(r) == k || (k == top && count(r) > top))
                    .collect();
                if !rs.is_empty() {
                    row(&format!("{k}{}", if k == top { "+" } else { "" }), &rs);
                }
            }
        };
        by_count("runnable", 1, 5, |r| r.running);
        println!("\nparked tasks by the pool's tasks computing at the submit:");
        by_count("computing", 0, 3, |r| r.computing);
        for (label, same) in [("same CPU as the driver", true), ("other CPU", false)] {
            let rs: Vec<&Rec> = parked
                .iter()
                .copied()
                .filter(|r| (r.worker_cpu == r.driver_cpu) == same)
                .collect();
            if !rs.is_empty() {
                println!();
                row(label, &rs);
            }
        }
        let per_task = |ns: u64| ns as f64 / 1e3 / r.completed.max(1) as f64;
        let compute = trace.stats().mean_cpu_us;
        let workers = after.workers.saturating_sub(before.workers);
        let driver = after.driver.saturating_sub(before.driver);
        let process = after.process.saturating_sub(before.process);
        println!("\nCPU per task, µs: process {:.1}; the tasks' compute (trace) {:.1}; workers {:.1} (beyond the compute {:.1}); driver {:.1}; the rest (sampler, exited threads) {:.1}",
            per_task(process),
            compute,
            per_task(workers),
            per_task(workers) - compute,
            per_task(driver),
            per_task(process.saturating_sub(workers + driver)));
        // Where a task's processing (start to finish) goes: its CPU, the
        // sleeps it asked for, waiting for a core, and the rest (the sleeps'
        // lateness: timer slack and the wake-up).
        let done: Vec<&Rec> = steady
            .iter()
            .copied()
            .filter(|r| r.finish > r.start)
            .collect();
        let m = |f: &dyn Fn(&Rec) -> u64| mean(&done.iter().map(|r| f(r)).collect::<Vec<_>>());
        let processing = m(&|r| r.finish - r.start);
        let (body, blocked, delay) = (
            m(&|r| r.body_cpu),
            m(&|r| r.blocked),
            m(&|r| r.body_run_delay),
        );
        let sleeps = done.iter().map(|r| r.sleeps).sum::<u64>() as f64 / done.len().max(1) as f64;
        let rest = processing - body - blocked - delay;
        println!("\nProcessing per task, µs: {processing:.1} = CPU {body:.1} + sleeps asked {blocked:.1} + waiting for a core {delay:.1} + the rest {rest:.1} ({sleeps:.2} sleeps per task: {:.1} per sleep)",
            if sleeps > 0.0 { rest / sleeps } else { 0.0 });
        if let Some(path) = a.get(4) {
            let mut f = std::io::BufWriter::new(File::create(path).expect("records file"));
            let _ = writeln!(f, "submit_ns,driver_cpu,running,computing,start_ns,worker_cpu,worker,prev_finish_ns,d_run_delay_ns,d_on_cpu_ns,d_slices,class,body_cpu_ns,cpu_ns,sleeps,body_run_delay_ns,finish_ns,blocked_ns");
            for r in &recs {
                let _ = writeln!(
                    f,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    r.submit,
                    r.driver_cpu,
                    r.running,
                    r.computing,
                    r.start,
                    r.worker_cpu,
                    r.worker,
                    r.prev_finish,
                    r.d_run_delay,
                    r.d_on_cpu,
                    r.d_slices,
                    class(r),
                    r.body_cpu,
                    r.cpu,
                    r.sleeps,
                    r.body_run_delay,
                    r.finish,
                    r.blocked
                );
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn reads_the_runnable_count_and_schedstat() {
            // /proc/loadavg: the 4th number is the runnable threads.
            assert_eq!(numbers_in("1.06 1.50 1.89 3/89 27842\n")[3], 3);
            assert_eq!(numbers_in("123456 7890 12\n"), vec![123456, 7890, 12]);
        }

        #[test]
        fn classes_a_task_by_its_workers_state_at_the_submit() {
            let at = |prev_finish, submit| Rec {
                prev_finish,
                submit,
                ..Rec::default()
            };
            assert_eq!(class(&at(0, 5_000_000)), "first");
            assert_eq!(class(&at(5_000_001, 5_000_000)), "busy");
            assert_eq!(class(&at(4_990_000, 5_000_000)), "spin");
            assert_eq!(class(&at(4_980_000, 5_000_000)), "parked");
        }
    }
}
