#!/usr/bin/env python3
"""Summarise a session-10 pipe13 A/B set (bench-pipeline-s10-pipe13-ab-<set>.jsonl): per arm, the
pooled row's ratio to the best peer (per repeat: pooled over the better of crossbeam-threads and
pariter in the same repeat; per round: the median of its 5 repeats), its % of the bound, its CPU
µs/item, its CPU µs/item minus the lower peer's (dcpu), switches/item; then each arm against A in
the rounds both ran.

python3 docs/records/bench-pipeline-s10-pipe13-ab-summary.py docs/records/bench-pipeline-s10-pipe13-ab-b1.jsonl [SHAPE] [--row IMPL]

--row picks the row compared (default tidepool-pipeline-pooled; session 11's pipe17 compares the thread-per-stage
row, --row tidepool-pipeline).
"""
import json, statistics as st, sys

args = sys.argv[1:]
ROW = "tidepool-pipeline-pooled"
if "--row" in args:
    i = args.index("--row")
    ROW = args[i + 1]
    del args[i:i + 2]

PEERS = ("crossbeam-threads", "pariter", "pipeliner")
lines = [json.loads(l) for l in open(args[0])]
print(lines[0]["arms"])
shapes = sorted({l["shape"] for l in lines[1:]})
print(f"row {ROW}")
for shape in shapes if len(args) < 2 else [args[1]]:
    print(f"== {shape}")
    res = {}
    for l in lines[1:]:
        if l["shape"] != shape:
            continue
        sc = l["run"]["scenarios"][0]
        rr = {x["impl"]: x for x in sc["results"]}
        me = rr[ROW]
        ratios = [v / max(rr[p]["repeats"][i] for p in PEERS if p in rr) for i, v in enumerate(me["repeats"])]
        res[(l["arm"], l["round"])] = dict(
            ratio=st.median(ratios), pct=100 * me["of_bound"], cpu=me["cpu_us_per_item"],
            dcpu=me["cpu_us_per_item"] - min(rr[p]["cpu_us_per_item"] for p in PEERS[:2] if p in rr),
            sw=me["switches_per_item"], load=float(l["loadavg"].split()[0]) if l["loadavg"] else None)
    rounds = sorted({r for _, r in res})
    arms = sorted({a for a, _ in res})
    for arm in arms:
        xs = [res[(arm, r)] for r in rounds if (arm, r) in res]
        for k in ("ratio", "pct", "cpu", "dcpu", "sw"):
            v = [x[k] for x in xs]
            print(f"{arm} {k:6s} median {st.median(v):8.3f} min {min(v):8.3f} max {max(v):8.3f}  per round: " + " ".join(f"{x:.3f}" for x in v))
    loads = [x["load"] for x in res.values() if x["load"] is not None]
    print(f"1-minute load {min(loads):.2f}-{max(loads):.2f}")
    for x in arms[1:]:
        both = [r for r in rounds if ("A", r) in res and (x, r) in res]
        w = sum(1 for r in both if res[(x, r)]["ratio"] > res[("A", r)]["ratio"])
        rat = [res[(x, r)]["ratio"] / res[("A", r)]["ratio"] for r in both]
        print(f"{x} vs A: ratio ahead in {w} of {len(both)}; {x}/A of the ratio: median {st.median(rat):.3f} ({min(rat):.3f}-{max(rat):.3f})")
