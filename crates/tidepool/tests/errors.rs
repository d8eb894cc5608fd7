//! Every public error type travels: `Send + Sync + 'static`, and `?` turns
//! it into `anyhow::Error` and `Box<dyn Error + Send + Sync>` (`JoinError`
//! and `Rejected<F>` are checked with the API in `api.rs` too).

use std::error::Error;

use tidepool::policy::{PolicySpec, SpecError};
use tidepool::{BuildError, Pool, SubmitError};

/// Compiles only for errors that cross threads and live anywhere.
fn travels<E: Error + Send + Sync + 'static>() {}

#[test]
fn error_types_are_send_sync_static() {
    travels::<BuildError>();
    travels::<SubmitError>();
    travels::<SpecError>();
    travels::<tidepool::UnknownFlavor>();
    travels::<tidepool::JoinError>();
    travels::<tidepool::Rejected<Box<dyn FnOnce() + Send>>>();
}

fn build_with_anyhow() -> anyhow::Result<Pool> {
    Ok(Pool::builder().min_threads(5).max_threads(2).build()?)
}

fn spec_with_box() -> Result<PolicySpec, Box<dyn Error + Send + Sync>> {
    Ok(PolicySpec::parse("no-such-policy")?)
}

fn submit_with_anyhow(pool: &Pool) -> anyhow::Result<()> {
    pool.shutdown();
    pool.execute(|| ())?;
    Ok(())
}

/// For a downcastable reason, drop the handed-back task first.
fn submit_keeping_the_reason(pool: &Pool) -> anyhow::Result<()> {
    pool.shutdown();
    pool.submit(|| 1).map_err(SubmitError::from)?;
    Ok(())
}

fn submit_with_box(pool: &Pool) -> Result<u32, Box<dyn Error + Send + Sync>> {
    Ok(pool.submit(|| 1)?.join()?)
}

#[test]
fn question_mark_converts_and_keeps_the_message() {
    let e = build_with_anyhow().unwrap_err();
    assert!(e.downcast_ref::<BuildError>().is_some());
    assert!(e.to_string().contains("min_threads"), "{e}");

    let e = spec_with_box().unwrap_err();
    assert!(e.downcast_ref::<SpecError>().is_some());
    assert!(e.to_string().contains("no-such-policy"), "{e}");

    let pool = Pool::new(1).unwrap();
    let e = submit_with_anyhow(&pool).unwrap_err();
    assert_eq!(e.to_string(), "the pool is shut down");
    let e = submit_keeping_the_reason(&pool).unwrap_err();
    assert_eq!(
        e.downcast_ref::<SubmitError>(),
        Some(&SubmitError::ShutDown)
    );
    let e = submit_with_box(&pool).unwrap_err();
    assert_eq!(e.to_string(), "the pool is shut down");
    // Across a thread boundary, as a worker's error would travel.
    let e: Box<dyn Error + Send + Sync> = std::thread::spawn(|| spec_with_box().unwrap_err())
        .join()
        .unwrap();
    assert!(e.is::<SpecError>());
}
