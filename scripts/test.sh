#!/usr/bin/env bash
# The project's test command (README): formatting, lints, every test, and the
# loom model checks. scripts/setup.sh installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

echo "== minimum Rust version (rust-version against Cargo.lock)"
python3 scripts/msrv.py

echo "== packaging metadata (every crate packageable in dependency order)"
python3 scripts/publishable.py

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test (workspace)"
cargo test --workspace --locked

echo "== the library's optional features (serde, metrics, tracing)"
cargo clippy -p tidepool-rs --all-targets --all-features --locked -- -D warnings
cargo test -p tidepool-rs --all-features --locked --lib --test export --test serde --test tracing_events --test errors
cargo test -p tidepool-rs --all-features --locked --doc MetricsExporter

echo "== the library's examples run (the rayon/tokio user's program, server, scoped, custom policy)"
for example in rayon_tokio_user server scoped custom_policy; do
  RUST_BACKTRACE=0 cargo run -q -p tidepool-rs --locked --example "$example" >/dev/null
done

echo "== loom model checks (--cfg loom)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p tidepool-rs --lib --release --locked loom
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p tidepool-pipeline --lib --release --locked loom

echo "== portable fallback: the library without OS calls (--cfg tidepool_no_os)"
RUSTFLAGS="--cfg tidepool_no_os" CARGO_TARGET_DIR=target/no_os \
  cargo clippy -p tidepool-rs --lib --tests --locked -- -D warnings
RUSTFLAGS="--cfg tidepool_no_os" CARGO_TARGET_DIR=target/no_os \
  cargo test -p tidepool-rs --lib --tests --locked

echo "== cargo doc (no warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
RUSTDOCFLAGS="-D warnings" cargo doc -p tidepool-rs --all-features --no-deps --locked --quiet

echo "== docs: links, repository paths, headings named from code, no history words (scripts/check-docs.py)"
python3 scripts/check-docs.py --self-test
python3 scripts/check-docs.py

echo "== scripts: the simulator against the recorded real sides (scripts/sim-band.py)"
python3 scripts/sim-band.py lab/sim/tests/agreement/sim \
  lab/sim/tests/agreement/real-a lab/sim/tests/agreement/real-b lab/sim/tests/agreement/real-c >/dev/null
