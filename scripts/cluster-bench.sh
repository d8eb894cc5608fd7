#!/usr/bin/env bash
# The cluster measurements of docs/benchmarks.md ("Cluster"), interleaved and
# repeated: broker hop latency, 1/2/3-node throughput, auto vs frequency
# sizing, hybrid vs mutex queue. One summary line per run on stdout; the
# full JSON of each run under $OUT (default target/cluster-bench).
# Usage: scripts/cluster-bench.sh [REPEATS]   (needs a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}"
out="${OUT:-target/cluster-bench}"
mkdir -p "$out"
tp=target/release/tidepool
[ -x "$tp" ] || cargo build --release -p tidepool-lab

run() { # label, then tidepool cluster replay args
  local label="$1"; shift
  local file="$out/$label.$r.json"
  "$tp" cluster replay --json "$@" > "$file" 2>/dev/null
  jq -r --arg l "$label" --arg r "$r" --arg load "$(cut -d' ' -f1 /proc/loadavg)" '
    [ $l, "rep=\($r)", "load=\($load)",
      "thr=\(.metrics.throughput|floor)/s",
      "hop_p50=\(.submit_to_start.p50_us|floor)us", "hop_p99=\(.submit_to_start.p99_us|floor)us",
      "resp_p50=\(.metrics.response.p50_us|floor)us", "wait_p50=\(.metrics.wait.p50_us|floor)us",
      "wait_p99=\(.metrics.wait.p99_us|floor)us", "turn_p50=\(.metrics.turnaround.p50_us|floor)us",
      "turn_p99=\(.metrics.turnaround.p99_us|floor)us",
      "pool_mean=\([.pool_sizes[] | (map(.[1]) | add / length)] | map(floor) | join("/"))",
      "pool_max=\([.pool_sizes[] | (map(.[1]) | max)] | map(floor) | join("/"))",
      "broker_cpu=\(.broker_cpu_us_per_request|floor)us/req" ] | join(" ")' "$file"
}

for r in $(seq 1 "$repeats"); do
  # Broker hop: light load, nothing queues (1 ms sleeps at 200/s).
  run hop --local 1 -w 'poisson:rate=200,service=const:1ms,free=100,n=2000,seed=1'
  # Scale-out: 3000 requests of 50 ms sleep arrive within ~1 s; each node is
  # a fixed pool of 16 (320 requests/s), so the nodes are the bottleneck.
  for n in 1 2 3; do
    run "nodes$n" --local "$n" --policy fixed:16 -w 'poisson:rate=3000,service=const:50ms,free=100,n=3000,seed=2'
  done
  # Sizing: 200 requests/s of 50 ms sleep on 2 nodes (about 5 busy threads each).
  for p in auto frequency; do
    run "size-$p" --local 2 --policy "$p" -w 'poisson:rate=200,service=const:50ms,free=100,n=2400,seed=3'
  done
  # Queue flavor on a node: many short handoffs (1 ms sleeps at 2000/s).
  for q in mutex hybrid; do
    run "queue-$q" --local 1 --policy fixed:32 --queue "$q" -w 'poisson:rate=2000,service=const:1ms,free=100,n=6000,seed=4'
  done
done
