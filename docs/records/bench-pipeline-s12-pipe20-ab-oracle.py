#!/usr/bin/env python3
"""Session 12 (pipe20): pooled ÷ oracle per round and arm of an A/B set packed by
bench-pipeline-s10-pipe14-ab-pack.py, and the rounds split by the machine's state during the run:
"free" when the oracle (the whole work on as many threads as cores, no hand-off) reached >= 85% of
the bound in its median repeat, "loaded" otherwise (another engineer's benchmark shared the cores).
Per round: the median over its 5 repeats of pooled / oracle in the same repeat.

python3 docs/records/bench-pipeline-s12-pipe20-ab-oracle.py docs/records/bench-pipeline-s12-pipe20-ab-s5.jsonl
"""
import json, statistics as st, sys

lines = [json.loads(l) for l in open(sys.argv[1])]
print(lines[0]["arms"])
res = {}
for l in lines[1:]:
    sc = l["run"]["scenarios"][0]
    rr = {x["impl"]: x for x in sc["results"]}
    me = rr["tidepool-pipeline-pooled"]
    orc = sc["oracle_repeats"]
    bound = sc["bound_items_per_sec"]
    res[(l["arm"], l["round"])] = dict(
        oracle=st.median(me_r / o for me_r, o in zip(me["repeats"], orc)),
        free=st.median(orc) / bound >= 0.85,
        opct=100 * st.median(orc) / bound,
        pct=100 * me["of_bound"], cpu=me["cpu_us_per_item"], rt=l["loadavg"].split(" rt ")[-1])
arms = sorted({a for a, _ in res})
rounds = sorted({r for _, r in res})
for r in rounds:
    print(f"round {r:2d}: " + "  ".join(
        f"{a} pooled {res[(a, r)]['pct']:5.1f}% oracle {res[(a, r)]['opct']:5.1f}% ÷oracle {res[(a, r)]['oracle']:.3f} "
        f"cpu {res[(a, r)]['cpu']:5.1f} rt {res[(a, r)]['rt']:>5}{' free' if res[(a, r)]['free'] else ''}"
        for a in arms if (a, r) in res))
for kind in ("free", "loaded", "all"):
    for a in arms:
        xs = [res[(a, r)] for r in rounds if (a, r) in res and (kind == "all" or res[(a, r)]["free"] == (kind == "free"))]
        if xs:
            v = [x["oracle"] for x in xs]
            c = [x["cpu"] for x in xs]
            print(f"{kind:6s} {a}: {len(xs):2d} rounds, pooled ÷ oracle median {st.median(v):.3f} ({min(v):.3f}-{max(v):.3f}), CPU µs/item median {st.median(c):.1f}")
    for a in arms[1:]:
        both = [r for r in rounds if ("A", r) in res and (a, r) in res
                and (kind == "all" or (res[("A", r)]["free"] == res[(a, r)]["free"] == (kind == "free")))]
        if both:
            w = sum(res[(a, r)]["oracle"] > res[("A", r)]["oracle"] for r in both)
            q = [res[(a, r)]["oracle"] / res[("A", r)]["oracle"] for r in both]
            print(f"{kind:6s} {a} vs A (rounds where both arms were {kind}): ahead in {w} of {len(both)}, "
                  f"{a}/A median {st.median(q):.3f} ({min(q):.3f}-{max(q):.3f})")
