//! The simulator against closed forms: a representative subset, short
//! replications (the full table is `tidepool sim --validate`), and a check
//! that the comparison can fail.

use tidepool_sim::validate::{run_case, Case, Effort, Model};

fn check(case: Case, scale: f64) {
    let rows = run_case(
        &case,
        Effort {
            replications: 10,
            scale,
            ..Effort::default()
        },
    );
    assert!(!rows.is_empty());
    for r in rows {
        assert!(r.littles_law, "{r:?}");
        assert!(r.pass, "{r:?}");
    }
}

#[test]
fn mmc_mean_wait_and_tail() {
    for (c, rho) in [(1, 0.5), (2, 0.8), (8, 0.9)] {
        check(
            Case {
                model: Model::MMc,
                c,
                rho,
            },
            0.05,
        );
    }
}

#[test]
fn mmc_many_servers_at_high_load() {
    // A thousand servers: the stationary start and the exact arrival rate
    // matter here (an empty start or a gap rounded to whole ns biases the
    // wait by several percent).
    check(
        Case {
            model: Model::MMc,
            c: 1000,
            rho: 0.95,
        },
        0.05,
    );
}

#[test]
fn loss_and_bounded_queue() {
    check(
        Case {
            model: Model::ErlangB,
            c: 8,
            rho: 0.9,
        },
        0.05,
    );
    check(
        Case {
            model: Model::MMcK { k: 12 },
            c: 8,
            rho: 1.2,
        },
        0.05,
    );
}

#[test]
fn thread_per_request_and_processor_sharing() {
    check(
        Case {
            model: Model::MMInf,
            c: 10,
            rho: 0.0,
        },
        0.05,
    );
    check(
        Case {
            model: Model::MM1PS,
            c: 1,
            rho: 0.5,
        },
        0.05,
    );
}

#[test]
fn pollaczek_khinchine() {
    check(
        Case {
            model: Model::MD1,
            c: 1,
            rho: 0.8,
        },
        0.05,
    );
    check(
        Case {
            model: Model::MG1 { scv: 4.0 },
            c: 1,
            rho: 0.5,
        },
        0.05,
    );
}

#[test]
fn a_wrong_model_fails() {
    // The check can fail: M/M/1 at ρ = 0.8 measured against M/D/1's
    // closed form (half the wait) is far outside tolerance and interval.
    let rows = run_case(
        &Case {
            model: Model::MMc,
            c: 1,
            rho: 0.8,
        },
        Effort {
            replications: 10,
            scale: 0.05,
            ..Effort::default()
        },
    );
    let sim = rows[0].simulated;
    let md1 = tidepool_sim::validate::formulas::pk_mean_wait(0.8, 0.0);
    assert!((sim - md1).abs() / md1 > 0.3, "{sim} vs {md1}");
    assert!(!(rows[0].ci99[0] <= md1 && md1 <= rows[0].ci99[1]));
}

#[test]
fn closed_loop_is_the_machine_repairman_model() {
    // Clients that think and wait for their answer: throughput and the
    // response time R = N/X − Z of M/M/c//N, below and at saturation.
    for (c, n, rho) in [(1, 5, 0.9), (8, 32, 1.0)] {
        check(
            Case {
                model: Model::MMcN { n },
                c,
                rho,
            },
            0.05,
        );
    }
}
