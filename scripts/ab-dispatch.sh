#!/usr/bin/env bash
# Interleaved A/B of tidepool-bench binaries on the dispatch scenarios: for
# ROUNDS rounds, run every binary once in turn (`--only tidepool,crossbeam
# --repeats 3`), so load changes hit all of them alike. Prints one line per
# binary, scenario and round (the default pool's ratio to the crossbeam pool
# and both pools' CPU per task), then the median and min–max per binary.
#
#   cp target/release/tidepool-bench /tmp/tb-old   # before the change
#   ...change, cargo build --release -p tidepool-bench...
#   scripts/ab-dispatch.sh 6 empty-2-submitters,empty-8-submitters \
#       /tmp/tb-old target/release/tidepool-bench
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 ROUNDS SCENARIOS BINARY..." >&2
  exit 2
fi
rounds=$1 scenarios=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    "$bin" dispatch --only tidepool,crossbeam --scenario "$scenarios" --repeats 3 -q |
      awk -v b="$bin" -v la="$(cut -d' ' -f1 /proc/loadavg)" '
        /^== / && !/summary/ { s = $2 }
        /^tidepool / { tc[s] = $(NF-2) }
        /^crossbeam / { cc[s] = $(NF-2) }
        /× *\[/ { r[$1] = $2 }
        END { for (k in r) printf "%s %s ratio %s cpu-ns %s %s load %s\n", b, k, r[k], tc[k], cc[k], la }' |
      tee -a "$out"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import collections, statistics, sys
ratio, cpu = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    key = (f[1], f[0])
    ratio[key].append(float(f[3].rstrip("×")))
    if f[5].isdigit() and f[6].isdigit():
        cpu[key].append(int(f[5]) / int(f[6]))
print("scenario / binary: tidepool ÷ crossbeam tasks/s, median [min–max]; CPU per task ÷ crossbeam's, median")
for key in sorted(ratio):
    r = ratio[key]
    c = statistics.median(cpu[key]) if cpu[key] else float("nan")
    print(f"{key[0]:20} {key[1]:40} {statistics.median(r):.2f} [{min(r):.2f}–{max(r):.2f}] n={len(r)}  cpu {c:.2f}")
PY
