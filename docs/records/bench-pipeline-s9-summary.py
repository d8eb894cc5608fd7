#!/usr/bin/env python3
"""Summarise session 9's pipeline runs: per shape and tidepool row, % of the
bound and ratio to the best peer (per repeat: the row over the best of
crossbeam-threads, pariter, pipeliner in the same repeat), CPU µs/item and
switches/item. Per run: medians over its repeats; 'all' = median (min-max)
over every run's medians (ratios: over every repeat).

python3 docs/records/bench-pipeline-s9-summary.py docs/records/bench-pipeline-s9-run*.json
"""
import json, statistics, sys

PEERS = ("crossbeam-threads", "pariter", "pipeliner")
ROWS = ("tidepool-pipeline", "tidepool-pipeline-pooled")
runs = [json.load(open(p)) for p in sys.argv[1:]]
shapes = [s["name"] for s in runs[0]["scenarios"]]
print("| shape | row | % of bound, per run | % of bound: median (min–max) | ÷ best peer per run | ÷ best peer: median (min–max) over all repeats | CPU µs/item | switches/item |")
print("|---|---|---|---|---|---|---:|---:|")
for shape in shapes:
    for row in ROWS:
        pct, ratio_runs, ratios, cpu, sw = [], [], [], [], []
        for r in runs:
            sc = next(s for s in r["scenarios"] if s["name"] == shape)
            res = {x["impl"]: x for x in sc["results"]}
            me = res[row]
            pct.append(100 * me["of_bound"])
            cpu.append(me["cpu_us_per_item"])
            sw.append(me["switches_per_item"])
            rr = []
            for i, v in enumerate(me["repeats"]):
                best = max(res[p]["repeats"][i] for p in PEERS if p in res)
                rr.append(v / best)
            ratios += rr
            ratio_runs.append(statistics.median(rr))
        m = statistics.median
        print(f"| {shape} | {row} | {' / '.join(f'{x:.1f}' for x in pct)} | {m(pct):.1f} ({min(pct):.1f}–{max(pct):.1f}) "
              f"| {' / '.join(f'{x:.3f}' for x in ratio_runs)} | {m(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f}) "
              f"| {m(cpu):.1f} | {m(sw):.2f} |")
print()
print("| shape | best peer per run (median items/s) | oracle (median items/s) | bound |")
print("|---|---|---|---|")
for shape in shapes:
    bp, orc, bd = [], [], []
    for r in runs:
        sc = next(s for s in r["scenarios"] if s["name"] == shape)
        res = {x["impl"]: x for x in sc["results"]}
        b = max((res[p]["items_per_sec"], p) for p in PEERS if p in res)
        bp.append(f"{b[1]} {b[0]:.0f}")
        orc.append(f"{sc['oracle_items_per_sec']:.0f}")
        bd.append(f"{sc['bound_items_per_sec']:.0f}")
    print(f"| {shape} | {' / '.join(bp)} | {' / '.join(orc)} | {' / '.join(bd)} |")
for i, r in enumerate(runs):
    print(f"run {i+1}: load {r['load_before']} -> {r['load_after']}, items {r['items']}, repeats {r['repeats']}, in flight {r['in_flight']}")
