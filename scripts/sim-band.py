#!/usr/bin/env python3
"""The simulated side against several real sides at once (docs/sim.md,
"Agreement with the real pool"): per workload and size, the real runs' own
spread of mean turnaround, and where the simulated value falls.

    scripts/sim-band.py SIM_DIR REAL_DIR REAL_DIR... [--markdown]

SIM_DIR holds sim-W.json, each REAL_DIR real-W.json (as scripts/sim-agreement.sh
writes them), for W in the workloads present in SIM_DIR. A row is
*reproducible* when the real runs agree with each other within 10% (largest
over smallest ≤ 1.1); there the 10% goal is judged against every run. Where
they do not, the question left is whether the simulated value lies in the real
runs' band widened by 10% ([0.9 × smallest, 1.1 × largest]).
"""
import json
import os
import sys

ORDER = ["cpu", "io", "mixed", "steps", "bursty", "azure", "closed"]


def fmt(us):
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1e3:.2f} ms"


def main(argv):
    markdown = "--markdown" in argv
    args = [a for a in argv if a != "--markdown"]
    if len(args) < 3:
        sys.exit("usage: sim-band.py SIM_DIR REAL_DIR REAL_DIR... [--markdown]")
    sim_dir, real_dirs = args[1], args[2:]
    present = {f[4:-5] for f in os.listdir(sim_dir) if f.startswith("sim-") and f.endswith(".json")}
    workloads = [w for w in ORDER if w in present] + sorted(present - set(ORDER))
    if not workloads:
        sys.exit(f"{sim_dir}: no sim-*.json")
    counts = {"repro": 0, "repro_ok": 0, "other": 0, "other_in_band": 0}
    lines = []
    for w in workloads:
        with open(os.path.join(sim_dir, f"sim-{w}.json")) as f:
            sim = {r["size"]: r for r in json.load(f)["sweep"]["rows"]}
        reals = []
        for d in real_dirs:
            path = os.path.join(d, f"real-{w}.json")
            try:
                with open(path) as f:
                    reals.append({r["size"]: r for r in json.load(f)["rows"]})
            except (OSError, ValueError, KeyError) as e:
                sys.exit(f"{path}: {e}")
        for size in sorted(sim):
            v = [r[size]["mean_turnaround_us"] for r in reals if size in r]
            if len(v) < 2 or min(v) <= 0:
                continue
            s = sim[size]["mean_turnaround_us"]
            lo, hi = min(v), max(v)
            if hi / lo <= 1.1:
                counts["repro"] += 1
                ok = all(abs(s / x - 1) <= 0.1 for x in v)
                counts["repro_ok"] += ok
                verdict = "within 10% of every run" if ok else "**outside 10% of a run**"
            else:
                counts["other"] += 1
                ok = 0.9 * lo <= s <= 1.1 * hi
                counts["other_in_band"] += ok
                verdict = "in the runs' band ±10%" if ok else "**outside the band**"
            lines.append((w, size, lo, hi, s, verdict))
    n = len(real_dirs)
    if markdown:
        print(f"| workload | size | real, {n} runs: min–max | spread | sim | sim is |")
        print("|---|---:|---|---:|---:|---|")
        for w, size, lo, hi, s, verdict in lines:
            print(f"| {w} | {size} | {fmt(lo)} – {fmt(hi)} | {hi / lo - 1:.0%} | {fmt(s)} | {verdict} |")
    else:
        for w, size, lo, hi, s, verdict in lines:
            print(f"{w:8} {size:4}  real {fmt(lo)} – {fmt(hi)} ({hi / lo - 1:.0%})  sim {fmt(s)}  {verdict}")
    print()
    print(f"Mean turnaround, {n} real runs: {counts['repro']} rows reproduce within 10% and the "
          f"simulated value is within 10% of every run on {counts['repro_ok']} of them; on the other "
          f"{counts['other']} rows it lies in the runs' band ±10% on {counts['other_in_band']}.")


if __name__ == "__main__":
    main(sys.argv)
