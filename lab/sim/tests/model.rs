//! The pool model's behaviour: each rule of the real pool shows in a
//! simulated run, and runs are deterministic.

use std::time::Duration;

use tidepool::policy::PolicySpec;
use tidepool_sim::{simulate, Costs, ExecutorModel, PoolModel, SimConfig, SimOutcome};
use tidepool_workload::{GenSpec, TaskRecord, TaskSpec};

fn gen(s: &str) -> GenSpec {
    s.parse().unwrap()
}

fn run(spec: &str, cores: usize, executor: ExecutorModel, costs: Costs) -> SimOutcome {
    let g = gen(spec);
    simulate(
        g.stream(),
        spec,
        SimConfig::new(cores, executor).with_costs(costs),
    )
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// Every task's record of `tasks` on a fixed pool of `workers` over `cores`,
/// Little's law checked.
fn records(tasks: Vec<TaskSpec>, cores: usize, workers: usize, costs: Costs) -> Vec<TaskRecord> {
    let mut config =
        SimConfig::new(cores, ExecutorModel::Pool(PoolModel::fixed(workers))).with_costs(costs);
    config.keep_records = true;
    let out = simulate(tasks, "tasks", config);
    assert!(out.littles_law.holds());
    out.result.records
}

/// (start, finish) of each record, in µs.
fn spans_us(records: &[TaskRecord]) -> Vec<(u64, u64)> {
    records
        .iter()
        .map(|r| (r.started_ns.unwrap() / 1000, r.finished_ns.unwrap() / 1000))
        .collect()
}

#[test]
fn same_seed_same_output_byte_for_byte() {
    let once = || {
        let executor = ExecutorModel::for_spec(&PolicySpec::parse("auto").unwrap(), 1, 100);
        let out = run(
            "onoff:rate=4000,on=50ms,off=100ms,off_rate=100,n=3000,service=exp:1ms,free=70,seed=3",
            2,
            executor,
            Costs::CALIBRATED,
        );
        assert!(out.littles_law.holds());
        serde_json::to_string(&out.result).unwrap()
    };
    assert_eq!(once(), once());
}

#[test]
fn every_policy_runs_unchanged_and_little_holds() {
    for p in [
        "fixed:4",
        "tpr",
        "watermark:2..16",
        "xu-bode",
        "hisdyn",
        "frequency",
        "hill-climb",
        "auto",
    ] {
        let executor = ExecutorModel::for_spec(&PolicySpec::parse(p).unwrap(), 1, 64);
        let out = run(
            "poisson:rate=3000,n=4000,service=exp:2ms,free=60,seed=2",
            4,
            executor,
            Costs::CALIBRATED,
        );
        assert_eq!(out.result.completed, 4000, "{p}");
        assert!(out.littles_law.holds(), "{p}: {:?}", out.littles_law);
        assert!(
            (out.littles_law.l() - out.littles_law.lambda_w()).abs()
                <= 1e-9 * out.littles_law.l().max(1.0),
            "{p}"
        );
    }
}

#[test]
fn adaptive_policies_are_called_and_logged() {
    let executor = ExecutorModel::for_spec(&PolicySpec::parse("auto").unwrap(), 1, 64);
    let out = run(
        "poisson:rate=8000,n=8000,service=exp:2ms,free=80,seed=5",
        2,
        executor,
        Costs::CALIBRATED,
    );
    let d = &out.result.decisions;
    assert!(d.first().is_some_and(|d| d.trigger == "start"), "{d:?}");
    assert!(
        d.iter().any(|d| d.trigger != "start"),
        "auto is called again"
    );
    // 8000/s × 2 ms = 16 busy on average, 80% blocked: auto grows past 2.
    assert!(out.result.max_threads > 4, "{}", out.result.max_threads);
}

#[test]
fn a_static_pool_never_exceeds_its_size_and_creates_nothing() {
    let out = run(
        "poisson:rate=5000,n=3000,service=exp:1ms,free=50,seed=1",
        2,
        ExecutorModel::Pool(PoolModel::fixed(3)),
        Costs::CALIBRATED,
    );
    assert_eq!(out.result.max_threads, 3);
    assert_eq!(out.result.threads_created, 0);
    assert!(out.result.size_series.iter().all(|p| p.target == Some(3)));
}

#[test]
fn thread_per_request_creates_a_thread_per_task_and_pays_the_spawn() {
    let costs = Costs {
        spawn: us(100),
        ..Costs::ZERO
    };
    let out = run(
        "periodic:rate=100,n=50,service=const:1ms",
        4,
        ExecutorModel::PerRequest,
        costs,
    );
    assert_eq!(out.result.threads_created, 50);
    // Each task waits exactly its thread's start.
    assert_eq!(out.result.wait.min_us, 100.0);
    assert_eq!(out.result.wait.max_us, 100.0);
    assert_eq!(out.result.turnaround.mean_us, 1100.0);
}

#[test]
fn oversubscribed_cores_stretch_compute_but_not_sleep() {
    // 4 tasks of 1 ms compute at once on 1 core: processor sharing ends
    // them together at 4 ms; 4 tasks of 1 ms sleep end at 1 ms.
    let burst = |cpu: bool| -> Vec<TaskSpec> {
        (0..4)
            .map(|i| {
                let t = TaskSpec::new(i + 1, 1, Duration::ZERO, Duration::from_millis(1));
                if cpu {
                    t
                } else {
                    t.with_split(Duration::ZERO, Duration::from_millis(1))
                }
            })
            .collect()
    };
    for (cpu, want) in [(true, 4000.0), (false, 1000.0)] {
        let out = simulate(
            burst(cpu),
            "burst",
            SimConfig::new(1, ExecutorModel::Pool(PoolModel::fixed(4))).with_costs(Costs::ZERO),
        );
        assert_eq!(out.result.turnaround.max_us, want, "cpu={cpu}");
    }
}

#[test]
fn a_bounded_queue_rejects_and_counts_it() {
    let out = run(
        "periodic:rate=10000,n=100,service=const:10ms",
        1,
        ExecutorModel::Pool(PoolModel::fixed(1).with_capacity(5)),
        Costs::ZERO,
    );
    // One running, five queued: the rest of the burst is refused.
    assert!(out.result.rejected > 80, "{}", out.result.rejected);
    assert_eq!(out.result.completed + out.result.rejected, 100);
    assert!(out.littles_law.holds());
}

#[test]
fn surplus_workers_retire_after_their_keep_alive() {
    // A pool that grows on demand (watermark) to serve a burst, then idles:
    // the keep-alive retires the extra workers back to min.
    let mut tasks: Vec<TaskSpec> = (0..40)
        .map(|i| {
            TaskSpec::new(i + 1, 1, Duration::ZERO, Duration::from_millis(5))
                .with_split(Duration::ZERO, Duration::from_millis(5))
        })
        .collect();
    // One last task long after, when the keep-alive (10 s default) ran out.
    tasks.push(TaskSpec::new(
        41,
        1,
        Duration::from_secs(30),
        Duration::from_millis(1),
    ));
    let executor = ExecutorModel::for_spec(&PolicySpec::parse("watermark:2..16").unwrap(), 1, 64);
    let out = simulate(
        tasks,
        "burst",
        SimConfig::new(2, executor).with_costs(Costs::ZERO),
    );
    assert_eq!(out.result.max_threads, 16);
    let last = out.result.size_series.last().unwrap();
    assert_eq!(last.live, 2, "{:?}", out.result.size_series);
}

#[test]
fn memory_does_not_grow_with_the_stream() {
    // A million tasks through a 4-worker pool: the stream is generated on
    // the fly, and nothing per task is kept.
    let g = gen("poisson:rate=1000000,n=1000000,service=exp:3us,seed=9");
    let mut config = SimConfig::new(4, ExecutorModel::Pool(PoolModel::fixed(4)));
    config.keep_decisions = false;
    let out = simulate(g.stream(), "long", config);
    assert_eq!(out.result.completed, 1_000_000);
    assert!(out.result.records.is_empty());
    assert!(out.result.size_series.len() <= 2);
}

#[test]
fn a_policy_that_only_ticks_is_called_from_the_start() {
    // `frequency` asks for no events, only a 1 s tick: the scheduler must be
    // asked at start when its first call is due (as the real controller
    // does), else the policy is never called and the pool stays at `min`.
    let executor = ExecutorModel::for_spec(&PolicySpec::parse("frequency").unwrap(), 1, 100);
    let out = run(
        "poisson:rate=500,n=2000,service=exp:1ms,free=50,seed=2",
        2,
        executor,
        Costs::CALIBRATED,
    );
    let ticks: Vec<_> = out
        .result
        .decisions
        .iter()
        .filter(|d| d.trigger == "tick")
        .collect();
    assert!(!ticks.is_empty(), "{:?}", out.result.decisions);
    assert!((ticks[0].t_ms - 1000.0).abs() < 1e-6, "{:?}", ticks[0]);
    assert!(out.result.max_threads > 1, "{}", out.result.max_threads);
}

#[test]
fn a_thread_made_runnable_on_busy_cores_waits_for_a_core_or_the_preemption() {
    // One core: task 1 computes 1 ms from 0; task 2 (1 ms) arrives at
    // 0.1 ms and wakes the second worker while the core computes.
    let tasks = || {
        vec![
            TaskSpec::new(1, 1, Duration::ZERO, Duration::from_millis(1)),
            TaskSpec::new(2, 1, us(100), Duration::from_millis(1)),
        ]
    };
    let spans = |preempt: Duration| {
        spans_us(&records(
            tasks(),
            1,
            2,
            Costs {
                preempt,
                ..Costs::ZERO
            },
        ))
    };
    // No preemption cost: processor sharing from 0.1 ms (both at half
    // speed: task 1 ends at 1.9 ms, task 2 alone at 2 ms).
    assert_eq!(spans(Duration::ZERO), vec![(0, 1900), (100, 2000)]);
    // Preempted for after 0.5 ms: task 2 starts at 0.6 ms, then both share.
    assert_eq!(spans(us(500)), vec![(0, 1400), (600, 2000)]);
    // A core frees (task 1 ends) before the preemption: task 2 runs then.
    assert_eq!(spans(us(2000)), vec![(0, 1000), (1000, 2000)]);
}

#[test]
fn a_thread_woken_on_a_computing_core_waits_for_its_part_or_the_slice() {
    // One core, as above: with `slice` the woken worker lands on the only
    // core and waits for task 1's part (0.9 ms left) or the slice.
    let tasks = vec![
        TaskSpec::new(1, 1, Duration::ZERO, Duration::from_millis(1)),
        TaskSpec::new(2, 1, us(100), Duration::from_millis(1)),
    ];
    let spans = |slice: Duration| {
        spans_us(&records(
            tasks.clone(),
            1,
            2,
            Costs {
                slice,
                ..Costs::ZERO
            },
        ))
    };
    // No slice: processor sharing.
    assert_eq!(spans(Duration::ZERO), vec![(0, 1900), (100, 2000)]);
    // The part ends within the slice: task 2 runs when it does.
    assert_eq!(spans(us(1400)), vec![(0, 1000), (1000, 2000)]);
    // The slice ends first: task 2 runs after it, then both share.
    assert_eq!(spans(us(500)), vec![(0, 1400), (600, 2000)]);
}

#[test]
fn a_woken_thread_lands_on_either_core_and_no_idle_core_pulls_it() {
    // Two cores, 200 pairs 10 ms apart: task A computes 1 ms, task B
    // (1 ms) arrives 0.1 ms later and wakes a worker while one core is
    // idle. With `slice` it lands on A's core half the time (seeded) and
    // then waits for A's end although the other core is idle; without,
    // it never waits.
    let tasks: Vec<TaskSpec> = (0..400u64)
        .map(|i| {
            let delay = if i % 2 == 0 { us(9_900) } else { us(100) };
            TaskSpec::new(
                i + 1,
                1,
                if i == 0 { Duration::ZERO } else { delay },
                Duration::from_millis(1),
            )
        })
        .collect();
    let late = |slice: Duration| {
        let costs = Costs {
            slice,
            // A wake-up event (with none an idle worker takes the task at once).
            wake: us(10),
            ..Costs::ZERO
        };
        records(tasks.clone(), 2, 2, costs)
            .iter()
            .filter(|r| r.started_ns.unwrap() > r.submitted_ns + 500_000)
            .count()
    };
    assert_eq!(late(Duration::ZERO), 0);
    let n = late(us(1400));
    assert!(
        (60..=140).contains(&n),
        "{n} of 200 waited for the busy core"
    );
}

/// Start times (µs) of `tasks` (sleeping 1 ms each) on 4 parked workers
/// of 8 cores whose wake-up takes `wake`.
fn starts_after_wake_ups(tasks: Vec<TaskSpec>, wake: Duration) -> Vec<u64> {
    let costs = Costs {
        wake,
        ..Costs::ZERO
    };
    let mut starts: Vec<u64> = records(tasks, 8, 4, costs)
        .iter()
        .map(|r| r.started_ns.unwrap() / 1000)
        .collect();
    starts.sort_unstable();
    starts
}

fn sleeper(id: u64, delay: Duration) -> TaskSpec {
    TaskSpec {
        blocked: Duration::from_millis(1),
        cpu: Duration::ZERO,
        ..TaskSpec::new(id, 1, delay, Duration::ZERO)
    }
}

#[test]
fn a_burst_into_an_idle_pool_wakes_one_worker_at_a_time() {
    // The pool's rule (`pool::sleep`, one wake-up in flight): 4 tasks at
    // 1 ms; the first submit wakes a worker (10 µs), the others find it on
    // its way and wake nobody; it takes a task and wakes the next, and so
    // on: one start every 10 µs (a wake-up per submit started all at 1,010).
    let burst = (1..=4)
        .map(|i| sleeper(i, if i == 1 { us(1000) } else { Duration::ZERO }))
        .collect();
    assert_eq!(
        starts_after_wake_ups(burst, us(10)),
        vec![1010, 1020, 1030, 1040]
    );
}

#[test]
fn a_wake_up_older_than_the_grace_holds_nothing_back() {
    // Wake-ups of 100 µs: tasks 1 and 2 at 1 ms (one wake-up, A), task 3
    // at 1.06 ms finds A's wake-up 60 µs old (over the pool's 50 µs) and
    // wakes B. A arrives at 1.1 ms (not the last on its way: no hand-on),
    // B at 1.16 ms, takes task 2 and hands on to C (1.26 ms). An unbounded
    // hold would give 1,100 / 1,200 / 1,300; a wake-up per submit 1,100 /
    // 1,100 / 1,160.
    let tasks = vec![
        sleeper(1, us(1000)),
        sleeper(2, Duration::ZERO),
        sleeper(3, us(60)),
    ];
    assert_eq!(
        starts_after_wake_ups(tasks, us(100)),
        vec![1100, 1160, 1260]
    );
}

#[test]
fn the_replay_driver_spins_on_a_core_before_each_arrival() {
    let costs = |driver: u64| Costs {
        driver: us(driver),
        ..Costs::ZERO
    };
    let pool = || ExecutorModel::Pool(PoolModel::fixed(1));
    // Two cores: the spin has a core of its own, the tasks do not notice,
    // and the cores' busy time is the tasks' and the spins' (the first
    // arrival, at 0, has no time before it to spin in).
    let spec = "periodic:rate=1000,n=100,service=const:500us";
    let out = run(spec, 2, pool(), costs(100));
    assert_eq!(out.result.turnaround.mean_us, 500.0);
    let cpu_ms = out.result.process_cpu_time_s * 1e3;
    assert!((cpu_ms - (50.0 + 99.0 * 0.1)).abs() < 0.2, "{cpu_ms}");
    // One core: a 950 µs task shares its last 50 µs with the next spin.
    let spec = "periodic:rate=1000,n=100,service=const:950us";
    assert_eq!(
        run(spec, 1, pool(), costs(0)).result.turnaround.mean_us,
        950.0
    );
    let slowed = run(spec, 1, pool(), costs(100)).result.turnaround.mean_us;
    assert!(slowed > 990.0, "{slowed}");
}

#[test]
fn the_driver_woken_on_a_computing_core_waits_for_its_part_then_spins_what_is_left() {
    // One core, as in the test above, with the slice's rule: the driver
    // wakes 100 µs before each arrival while the 950 µs task has 50 µs
    // left, lands on the only core and waits for it (it used to share the
    // core at once and stretch the task), then spins the last 50 µs.
    let spec = "periodic:rate=1000,n=100,service=const:950us";
    let costs = Costs {
        driver: us(100),
        slice: us(1400),
        ..Costs::ZERO
    };
    let out = run(spec, 1, ExecutorModel::Pool(PoolModel::fixed(1)), costs);
    assert_eq!(out.result.turnaround.mean_us, 950.0);
    let cpu_ms = out.result.process_cpu_time_s * 1e3;
    assert!((cpu_ms - (95.0 + 99.0 * 0.05)).abs() < 0.01, "{cpu_ms}");
    // 90 µs left when it wakes: it spins the last 10 µs.
    let spec = "periodic:rate=500,n=50,service=const:1990us";
    let out = run(spec, 1, ExecutorModel::Pool(PoolModel::fixed(1)), costs);
    assert_eq!(out.result.turnaround.mean_us, 1990.0);
    let cpu_ms = out.result.process_cpu_time_s * 1e3;
    assert!(
        (cpu_ms - (50.0 * 1.99 + 49.0 * 0.01)).abs() < 0.001,
        "{cpu_ms}"
    );
}

#[test]
fn the_driver_does_not_spin_while_tasks_queue() {
    // CPU-bound overload (1.5× what 2 cores serve): the queue never
    // empties, so the driver never spins and the pool's size does not
    // decide how much of the cores it gets (it did: 2 workers served 5%
    // less than 32, which outnumbered the spin for the cores).
    let spec = "poisson:rate=3000,n=1800,service=normal:1ms:100us,seed=3";
    let costs = Costs {
        driver: us(100),
        ..Costs::ZERO
    };
    let throughput = |n: usize| {
        let pool = ExecutorModel::Pool(PoolModel::fixed(n));
        let out = run(spec, 2, pool, costs);
        (out.result.throughput, out.result.process_cpu_time_s)
    };
    let (two, cpu_two) = throughput(2);
    let (many, _) = throughput(32);
    assert!(two >= 0.99 * many, "{two} vs {many}");
    // Only the first arrivals, before the queue forms, cost a spin.
    let work = 1800.0 * 1e-3;
    assert!(
        cpu_two < work * 1.02,
        "{cpu_two} s of CPU for {work} s of work"
    );
}

#[test]
fn sleeping_and_hand_offs_cost_cpu() {
    let costs = Costs {
        sleep_cpu: us(10),
        handoff_cpu: us(5),
        ..Costs::ZERO
    };
    let pool = || ExecutorModel::Pool(PoolModel::fixed(1));
    // All-sleep tasks of 1 ms (one slice) handed to a parked worker: the
    // hand-off and the sleep's own CPU come first.
    let spec = "periodic:rate=100,n=10,service=const:1ms,free=100";
    let out = run(spec, 1, pool(), costs);
    assert_eq!(out.result.turnaround.mean_us, 1015.0);
    assert!((out.result.process_cpu_time_s * 1e6 - 150.0).abs() < 1e-3);
    // Back-to-back compute tasks: only the first was handed to a parked
    // worker, the rest were taken from the queue.
    let spec = "periodic:rate=1000000,n=3,service=const:1ms";
    let out = run(spec, 1, pool(), costs);
    assert!((out.result.process_cpu_time_s * 1e6 - 3005.0).abs() < 1e-3);
}

#[test]
fn a_closed_loops_answer_wakes_the_sleeping_driver() {
    // One client, all-sleep tasks of 1 ms, 10 ms of think time: the driver
    // naps between an answer and the next arrival, so each answer wakes
    // it (a nap's CPU, as `recv_timeout` in the replay); the spin before
    // each arrival and the task's sleep cost theirs too.
    let costs = Costs {
        driver: us(1),
        sleep_cpu: us(10),
        ..Costs::ZERO
    };
    let pool = || ExecutorModel::Pool(PoolModel::fixed(1));
    let cpu_per_task = |spec: &str| {
        let trace = gen(spec).generate();
        let config = SimConfig::new(2, pool())
            .with_costs(costs)
            .with_clients(trace.clients);
        let out = simulate(trace.tasks, spec, config);
        assert_eq!(out.result.completed, 10);
        out.result.process_cpu_time_s * 1e6 / 10.0
    };
    let open = cpu_per_task("periodic:rate=100,n=10,service=const:1ms,free=100");
    let closed = cpu_per_task("closed:clients=1,think=const:10ms,n=10,service=const:1ms,free=100");
    // Open: each task's sleep 10, and the spin 1 and its nap 10 before
    // every arrival but the first (at 0). Closed: the first arrival comes
    // a think time in, so all ten have a spin, and every answer but the
    // last (the run ends with it) wakes the driver: 10 more each.
    assert!((open - (100.0 + 9.0 * 11.0) / 10.0).abs() < 1e-3, "{open}");
    let expected = (100.0 + 10.0 * 11.0 + 9.0 * 10.0) / 10.0;
    assert!((closed - expected).abs() < 1e-3, "{closed}");
}

/// The simulator skips `TaskBody::new` for a task that only computes or
/// only blocks (one slice): the replay's rule must still say so.
#[test]
fn a_task_that_only_computes_or_only_blocks_is_one_slice() {
    use tidepool_workload::body::TaskBody;
    for d in [us(1), us(700), us(5_000), Duration::from_secs(2)] {
        assert_eq!(TaskBody::new(d, Duration::ZERO).slices, 1, "{d:?}");
        assert_eq!(TaskBody::new(Duration::ZERO, d).slices, 1, "{d:?}");
    }
}
