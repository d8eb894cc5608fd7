#!/usr/bin/env python3
"""Session 17: each implementation's items/s over the decoupled run's in the same repeat
(`decoupled_repeats`: the shape's groups on their own threads, no hand-off), pooled over one or
more `tidepool-bench pipeline --json` outputs: median with a 95% bootstrap interval (10,000
resamples of the repeats, fixed seed), and the decoupled run over the bound.

python3 docs/records/bench-pipeline-s17-decoupled.py FILE.json [FILE.json ...]
"""
import json, random, statistics as st, sys

rng = random.Random(17)


def boot(v, b=10_000):
    xs = sorted(st.median([rng.choice(v) for _ in v]) for _ in range(b))
    return xs[int(0.025 * b)], xs[int(0.975 * b) - 1]


by = {}
dec = {}
for f in sys.argv[1:]:
    for sc in json.load(open(f))["scenarios"]:
        d = sc["decoupled_repeats"]
        dec.setdefault(sc["name"], []).extend(x / sc["bound_items_per_sec"] for x in d)
        for r in sc["results"]:
            by.setdefault((sc["name"], r["impl"]), []).extend(a / b for a, b in zip(r["repeats"], d))

print("| shape | decoupled ÷ bound | row | ÷ decoupled, per repeat: median (95% CI) | repeats |")
print("|---|---|---|---|---:|")
last = None
for (shape, imp), v in by.items():
    lo, hi = boot(v)
    head = f"{shape} | {st.median(dec[shape]):.3f}" if shape != last else " | "
    last = shape
    print(f"| {head} | {imp} | {st.median(v):.3f} ({lo:.3f}–{hi:.3f}) | {len(v)} |")
