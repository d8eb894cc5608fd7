//! Every public error type of the workload crate travels: `Send + Sync +
//! 'static`, and `?` turns it into `anyhow::Error` and
//! `Box<dyn Error + Send + Sync>`.

use std::error::Error;

use tidepool_workload::{load_workload, GenSpec, SpecError, TraceError, WorkloadError};

fn travels<E: Error + Send + Sync + 'static>() {}

#[test]
fn error_types_are_send_sync_static() {
    travels::<TraceError>();
    travels::<SpecError>();
    travels::<WorkloadError>();
}

fn spec_with_box() -> Result<GenSpec, Box<dyn Error + Send + Sync>> {
    Ok("poisson:rate=fast".parse::<GenSpec>()?)
}

fn load_with_anyhow() -> anyhow::Result<usize> {
    Ok(load_workload("/nonexistent/x.trace", 1.0)?.len())
}

#[test]
fn question_mark_converts_and_keeps_the_message() {
    let e = spec_with_box().unwrap_err();
    assert!(e.is::<SpecError>());
    assert!(e.to_string().contains("rate"), "{e}");
    let e = load_with_anyhow().unwrap_err();
    assert!(e.downcast_ref::<WorkloadError>().is_some());
    assert!(e.to_string().contains("/nonexistent/x.trace"), "{e}");
}
