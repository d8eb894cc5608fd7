//! Run one validation case with a chosen effort, e.g. to look closer at a
//! row of `tidepool sim --validate`:
//!
//! ```text
//! cargo run --release -p tidepool-sim --example validate_case -- mmc 10000 0.99 1 60
//! #                                               model c   rho  scale replications
//! ```
//!
//! Models: `mmc`, `mmck12` (M/M/c/12), `erlangb`, `inf`, `md1`, `mg1` (scv 4), `ps`,
//! `closedN` (M/M/c//N, `N` clients).

use tidepool_sim::validate::{run_case, Case, Effort, Model};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: validate_case MODEL C RHO SCALE [REPLICATIONS]");
        std::process::exit(2);
    }
    let model = match a[1].as_str() {
        "mmc" => Model::MMc,
        "mmck12" => Model::MMcK { k: 12 },
        "erlangb" => Model::ErlangB,
        "inf" => Model::MMInf,
        "md1" => Model::MD1,
        "mg1" => Model::MG1 { scv: 4.0 },
        "ps" => Model::MM1PS,
        m if m.starts_with("closed") => match m["closed".len()..].parse() {
            Ok(n) => Model::MMcN { n },
            Err(_) => {
                eprintln!("`closedN` needs a number of clients, e.g. closed32");
                std::process::exit(2);
            }
        },
        other => {
            eprintln!("unknown model `{other}`");
            std::process::exit(2);
        }
    };
    let parse = |i: usize, what: &str| -> f64 {
        a[i].parse().unwrap_or_else(|_| {
            eprintln!("{what} `{}` is not a number", a[i]);
            std::process::exit(2)
        })
    };
    let (c, rho, scale) = (parse(2, "C") as usize, parse(3, "RHO"), parse(4, "SCALE"));
    let replications = a.get(5).map_or(20.0, |_| parse(5, "REPLICATIONS")) as usize;
    let started = std::time::Instant::now();
    let effort = Effort {
        replications,
        scale,
        ..Effort::default()
    };
    for r in run_case(&Case { model, c, rho }, effort) {
        println!(
            "{} c={c} rho={rho} {}: analytic {:.6e} simulated {:.6e} rel error {:.2}% 99% CI [{:.4e}, {:.4e}] {:?} ({} x {} arrivals)",
            r.model,
            r.metric,
            r.analytic,
            r.simulated,
            100.0 * r.rel_error,
            r.ci99[0],
            r.ci99[1],
            r.basis,
            r.replications,
            r.tasks
        );
    }
    eprintln!("{:.1} s", started.elapsed().as_secs_f64());
}
