#!/usr/bin/env bash
# Real time against virtual time (docs/sim.md, "Agreement with the real
# pool"): each workload swept on static pools by the real replay and by the
# simulator (2 cores, calibrated costs), then one table of throughput and
# mean turnaround per size, and one of the sweeps' stable points, oracles
# and safe zones. Needs a quiet machine: the real sweeps take ~8 minutes at
# scale 0.5 and any other load on the 2 cores moves them.
#
#   scripts/sim-agreement.sh [OUT_DIR] [SCALE]      # defaults: sim-agreement 0.5
#   WORKLOADS="cpu io" scripts/sim-agreement.sh     # a subset
#   SIM_ONLY=1 scripts/sim-agreement.sh DIR         # the simulated side again, against DIR's real sweeps
#   SIM_ARGS="--preempt 300us" scripts/sim-agreement.sh   # extra options of tidepool sim
#   REAL_FROM="lab/sim/tests/agreement/real-a lab/sim/tests/agreement/real-c" \
#     scripts/sim-agreement.sh /tmp/x     # the simulated side once into /tmp/x, scored against each
#                                         # folder's real sweeps (they are read, never written), then
#                                         # scripts/sim-band.py over all of them
set -euo pipefail
out=${1:-sim-agreement}
scale=${2:-0.5}
workloads=${WORKLOADS:-cpu io mixed steps bursty azure closed}
sizes=1,2,4,8,16,32
tidepool=${TIDEPOOL:-target/release/tidepool}
mkdir -p "$out"
[ -z "${REAL_FROM:-}" ] || SIM_ONLY=1
for w in $workloads; do
  if [ -z "${SIM_ONLY:-}" ]; then
    echo "load average $(cut -d' ' -f1-3 /proc/loadavg) before $w" | tee -a "$out/loadavg.txt" >&2
    "$tidepool" sweep -w "$w" --scale "$scale" --sizes "$sizes" --json -q > "$out/real-$w.json"
  fi
  # shellcheck disable=SC2086  # SIM_ARGS is a list of options
  "$tidepool" sim -w "$w" --scale "$scale" --sizes "$sizes" --cores 2 --policies auto ${SIM_ARGS:-} --json -q > "$out/sim-$w.json"
done
[ -n "${SIM_ONLY:-}" ] || echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end" | tee -a "$out/loadavg.txt" >&2
for real in ${REAL_FROM:-$out}; do
[ -z "${REAL_FROM:-}" ] || echo "## against $real"
python3 - "$out" "$real" $workloads <<'PY'
import json, sys
out, real_dir, workloads = sys.argv[1], sys.argv[2], sys.argv[3:]
def t(us):
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1e3:.2f} ms"
rows, points = [], []
within = {"tput": 0, "turnaround": 0}   # exact ratios, not the rounded table
for w in workloads:
    real = json.load(open(f"{real_dir}/real-{w}.json"))
    sim = json.load(open(f"{out}/sim-{w}.json"))["sweep"]
    by_size = {r["size"]: r for r in sim["rows"]}
    for r in real["rows"]:
        s = by_size[r["size"]]
        dt = s["throughput"] / r["throughput"] - 1
        dm = s["mean_turnaround_us"] / r["mean_turnaround_us"] - 1
        within["tput"] += abs(dt) <= 0.1
        within["turnaround"] += abs(dm) <= 0.1
        rows.append(f"| {w} | {r['size']} | {r['throughput']:.0f} | {s['throughput']:.0f} | {dt:+.1%} "
                    f"| {t(r['mean_turnaround_us'])} | {t(s['mean_turnaround_us'])} | {dm:+.1%} |")
    zone = lambda z: f"[{z[0]}, {z[1]}]" if z else "-"
    points.append(f"| {w} | {real['stable_point']} | {sim['stable_point']} | {real['oracle_size']} "
                  f"| {sim['oracle_size']} | {zone(real.get('safe_zone'))} | {zone(sim.get('safe_zone'))} |")
print("| workload | size | real tput/s | sim tput/s | Δ tput | real turnaround | sim turnaround | Δ turnaround |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
print("\n".join(rows))
print()
print("| workload | stable point real | sim | oracle real | sim | safe zone real | sim |")
print("|---|---:|---:|---:|---:|---|---|")
print("\n".join(points))
print()
print(f"Within 10%: throughput {within['tput']}/{len(rows)}, mean turnaround {within['turnaround']}/{len(rows)}; "
      f"stable points equal {sum(p.split('|')[2] == p.split('|')[3] for p in points)}/{len(points)}")
PY
done
# Several real sides: how far apart the real runs are, and where the simulated side falls.
# shellcheck disable=SC2086  # REAL_FROM is a list of folders
if [ "$(echo ${REAL_FROM:-} | wc -w)" -ge 2 ]; then
  echo "## every real side at once"
  python3 scripts/sim-band.py "$out" $REAL_FROM
fi
