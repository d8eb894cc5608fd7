#!/usr/bin/env bash
# The project's test command (README): formatting, lints, every test, and the
# loom model checks. Installs the Rust components it needs.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust from https://rustup.rs" >&2
  exit 1
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test (workspace)"
cargo test --workspace --locked

echo "== loom model checks (--cfg loom)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p tidepool --lib --release --locked loom
