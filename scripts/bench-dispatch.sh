#!/usr/bin/env bash
# Three full runs of the dispatch benchmark, as docs/benchmarks.md records
# them: each run's JSON is kept, and each is printed as the Markdown table
# (with the load averages at its start and end) ready to paste.
#
#   scripts/bench-dispatch.sh [OUT_DIR] [extra `dispatch` options...]
#   scripts/bench-dispatch.sh /tmp/dispatch --repeats 7
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/bench-dispatch}"
shift || true
mkdir -p "$out"
cargo build --release -p tidepool-bench
bin=target/release/tidepool-bench
for run in 1 2 3; do
  echo "== run $run (load average now: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$bin" dispatch --save "$out/run$run.json" "$@" > "$out/run$run.txt"
done
for run in 1 2 3; do
  echo
  echo "**Run $run**"
  echo
  "$bin" dispatch --load "$out/run$run.json" --markdown
  echo
  sed -n '/== summary/,$p' "$out/run$run.txt"
done
