#!/usr/bin/env python3
"""A/B two (or more) builds of the `tidepool` binary on suite workloads.

Runs, for each repeat, each workload and each binary in turn (alternating, so
machine noise hits both alike):

    BIN compare -w W --scale 0.25 -s <oracle size> -p POLICY --json

and prints each run, then the median over repeats of the policy's p99 wait
and mean turnaround relative to the static oracle of the same run.

Usage:
    scripts/ab.py REPEATS WORKLOADS BIN[,BIN...] [POLICY]
    scripts/ab.py 3 mixed,bursty,io /tmp/tidepool-old,target/release/tidepool auto

The oracle sizes are the demo sweep's usual winners (cpu 2, io 32, mixed 8,
steps 8, bursty 16, azure 16); a fixed size keeps one repeat short.
"""
import json
import statistics
import subprocess
import sys

ORACLE = {"cpu": "2", "io": "32", "mixed": "8", "steps": "8", "bursty": "16", "azure": "16"}


def run(binary, workload, policy):
    out = subprocess.run(
        [binary, "compare", "-w", workload, "--scale", "0.25", "-s", ORACLE[workload],
         "-p", policy, "-q", "--json", "--drain-timeout", "15s"],
        capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    o, a = d["oracle"], d["policies"][0]
    return (a["p99_wait_us"] / max(o["p99_wait_us"], 1.0),
            a["mean_turnaround_us"] / o["mean_turnaround_us"],
            a["p99_wait_us"], a["threads_created"], a["avg_threads"])


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    repeats, workloads = int(sys.argv[1]), sys.argv[2].split(",")
    binaries, policy = sys.argv[3].split(","), (sys.argv[4] if len(sys.argv) > 4 else "auto")
    unknown = [w for w in workloads if w not in ORACLE]
    if unknown:
        sys.exit(f"unknown workload(s) {unknown}; known: {', '.join(ORACLE)}")
    results = {}
    for r in range(repeats):
        for w in workloads:
            for b in binaries:
                x = run(b, w, policy)
                results.setdefault((w, b), []).append(x)
                print(f"{r} {w} {b}: p99 wait x{x[0]:.2f} turnaround x{x[1]:.3f} "
                      f"p99 wait {x[2]:.0f} us, created {x[3]}, avg threads {x[4]:.1f}", flush=True)
    for w in workloads:
        for b in binaries:
            xs = results[(w, b)]
            print(f"MEDIAN {w} {b}: p99 wait x{statistics.median(x[0] for x in xs):.2f} "
                  f"turnaround x{statistics.median(x[1] for x in xs):.3f}")


if __name__ == "__main__":
    main()
