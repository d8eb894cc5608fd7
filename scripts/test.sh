#!/usr/bin/env bash
# The project's test command (README): formatting, lints, every test, and the
# loom model checks. scripts/setup.sh installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test (workspace)"
cargo test --workspace --locked

echo "== loom model checks (--cfg loom)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p tidepool --lib --release --locked loom
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p tidepool-pipeline --lib --release --locked loom
