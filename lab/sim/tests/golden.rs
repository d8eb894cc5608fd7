//! Golden outputs: a fixed set of runs must give, byte for byte, the
//! results recorded in `tests/golden/results.txt`. Speed work on the engine
//! (event calendar, processor sharing, bulk recording) must not change a
//! single number; a deliberate change of the model regenerates the file
//! with `TIDEPOOL_UPDATE_GOLDEN=1 cargo test -p tidepool-sim --test golden`
//! and says why in its commit.

use std::time::Duration;

use tidepool::policy::PolicySpec;
use tidepool_sim::{simulate, Costs, ExecutorModel, SimConfig};
use tidepool_workload::GenSpec;

/// (workload, cores, executor): compute, blocking, bursts, oversubscribed
/// cores, adaptive policies, a thread per request.
const RUNS: [(&str, usize, &str); 8] = [
    (
        "poisson:rate=1500,n=4000,service=exp:1ms,free=0,seed=1",
        2,
        "fixed:2",
    ),
    (
        "poisson:rate=1500,n=4000,service=exp:2ms,free=60,seed=2",
        2,
        "fixed:8",
    ),
    (
        "poisson:rate=3000,n=4000,service=exp:1ms,free=30,seed=3",
        2,
        "auto",
    ),
    (
        "onoff:rate=4000,on=50ms,off=100ms,off_rate=100,n=3000,service=exp:1ms,free=70,seed=4",
        2,
        "hisdyn",
    ),
    (
        "poisson:rate=2000,n=3000,service=lognormal:1ms:3ms,free=50,seed=5",
        2,
        "watermark:3..100",
    ),
    (
        "poisson:rate=800,n=3000,service=exp:2ms,free=90,seed=6",
        4,
        "tpr",
    ),
    (
        "poisson:rate=40000,n=20000,service=exp:2ms,free=50,seed=7",
        64,
        "auto",
    ),
    (
        "poisson:rate=1200,n=3000,service=exp:1ms,free=20,seed=8",
        2,
        "hill-climb",
    ),
];

/// A run with the replay's driver and the preemption latency modelled
/// (both zero in [`Costs::CALIBRATED`]).
const MODELLED: (&str, usize, &str) = (
    "poisson:rate=1500,n=4000,service=exp:1ms,free=40,seed=9",
    2,
    "fixed:6",
);

fn results() -> String {
    let mut out = String::new();
    let modelled = Costs {
        driver: Duration::from_micros(100),
        preempt: Duration::from_micros(500),
        ..Costs::CALIBRATED
    };
    let runs = RUNS.iter().map(|&r| (r, Costs::CALIBRATED));
    for ((spec, cores, policy), costs) in runs.chain([(MODELLED, modelled)]) {
        let g: GenSpec = spec.parse().unwrap();
        let executor = ExecutorModel::for_spec(&PolicySpec::parse(policy).unwrap(), 1, 100);
        let config = SimConfig::new(cores, executor).with_costs(costs);
        let o = simulate(g.stream(), spec, config);
        assert!(o.littles_law.holds(), "{spec} {policy}");
        let mut r = o.result;
        // The series and log are long: their digest stands for them.
        let series = serde_json::to_string(&r.size_series).unwrap();
        let decisions = serde_json::to_string(&r.decisions).unwrap();
        r.size_series.clear();
        r.decisions.clear();
        r.records.clear();
        out += &format!(
            "{policy} on {cores} cores, {spec}: events {} series {:016x} decisions {:016x}\n{}\n",
            o.events,
            fnv(&series),
            fnv(&decisions),
            serde_json::to_string(&r).unwrap()
        );
    }
    out
}

/// FNV-1a: a stable digest (std's hashers may change between releases).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn results_match_the_recorded_ones_byte_for_byte() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/results.txt");
    let now = results();
    if std::env::var_os("TIDEPOOL_UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &now).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(path).unwrap();
    for (i, (a, b)) in recorded.lines().zip(now.lines()).enumerate() {
        assert_eq!(a, b, "line {} of {path} differs", i + 1);
    }
    assert_eq!(recorded.lines().count(), now.lines().count());
}
