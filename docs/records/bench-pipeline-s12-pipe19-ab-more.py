#!/usr/bin/env python3
"""Session 12 (pipe19): what the pipe13 summary does not print, from a packed A/B set
(bench-pipeline-s12-pipe19-ab-SET.jsonl): per arm, the pooled row's items/s over the oracle's (per
repeat, in the same run; per round the median of the repeats), and each arm against A in the rounds
both ran: pooled items/s arm/A (paired, per round), rounds won, split by the round trip the A/B script
appended to the load line (near: both arms' < 200 ns, far: both >= 200 ns, taken before the arm's run;
a round trip the ping-pong did not finish in time is unknown and in neither).

python3 docs/records/bench-pipeline-s12-pipe19-ab-more.py docs/records/bench-pipeline-s12-pipe19-ab-s1.jsonl [SHAPE]
"""
import json, statistics as st, sys

ROW = "tidepool-pipeline-pooled"
lines = [json.loads(l) for l in open(sys.argv[1])]
shapes = sorted({l["shape"] for l in lines[1:]})
for shape in shapes if len(sys.argv) < 3 else [sys.argv[2]]:
    print(f"== {shape}")
    res = {}
    for l in lines[1:]:
        if l["shape"] != shape:
            continue
        sc = l["run"]["scenarios"][0]
        me = {x["impl"]: x for x in sc["results"]}[ROW]
        orc = sc.get("oracle_repeats") or []
        over = [v / o for v, o in zip(me["repeats"], orc)] if orc else [float("nan")]
        rt = l["loadavg"].split(" rt ")[1] if " rt " in l["loadavg"] else None
        res[(l["arm"], l["round"])] = dict(
            ips=st.median(me["repeats"]), orc=st.median(over), rt=int(rt) if rt and rt.strip().isdigit() else None)
    rounds = sorted({r for _, r in res})
    arms = sorted({a for a, _ in res})
    for arm in arms:
        v = [res[(arm, r)]["orc"] for r in rounds if (arm, r) in res]
        print(f"{arm} pooled/oracle median {st.median(v):.3f} min {min(v):.3f} max {max(v):.3f}")
    for x in arms[1:]:
        both = [r for r in rounds if ("A", r) in res and (x, r) in res]
        for label, keep in (("all", lambda r: True),
                            ("near", lambda r: all((res[(a, r)]["rt"] or 10**9) < 200 for a in ("A", x))),
                            ("far", lambda r: all((res[(a, r)]["rt"] or 0) >= 200 for a in ("A", x)))):
            rs = [r for r in both if keep(r)]
            if not rs:
                continue
            q = [res[(x, r)]["ips"] / res[("A", r)]["ips"] for r in rs]
            w = sum(1 for v in q if v > 1)
            print(f"{x} vs A ({label}, {len(rs)} rounds): pooled items/s {x}/A median {st.median(q):.3f} "
                  f"({min(q):.3f}-{max(q):.3f}); {x} won {w} of {len(rs)}")
