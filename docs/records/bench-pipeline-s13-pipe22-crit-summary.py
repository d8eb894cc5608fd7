#!/usr/bin/env python3
"""Session 13 (pipe22): summarise bench-pipeline-s13-pipe22-crit.txt (or one set of it): per arm the
critical section per hand-off (median, range), hand-offs per run, and (set 2's DIAG2 lines) CPU, user,
spin and park time per item, split by the round trip before the run (near < 200 ns, far >= 200 ns);
then B against A per paired round.

python3 docs/records/bench-pipeline-s13-pipe22-crit-summary.py FILE [SET]   (SET: 1 or 2; default: both, separately)
"""
import re, sys, statistics as st
text = open(sys.argv[1]).read()
sets = re.split(r"^## ", text, flags=re.M)[1:] or [text]
want = sys.argv[2] if len(sys.argv) > 2 else None
for k, chunk in enumerate(sets, 1):
    if want and str(k) != want:
        continue
    print(f"#### set {k}: {chunk.splitlines()[0]}")
    rows = []
    for l in chunk.splitlines():
        m = re.search(r"round (\d+) arm (\S) load (\S+) rt (\d*) \| DIAG crit tasks (\d+) mean_us (\S+) (?:DIAG2 items \d+ user_us_item (\S+) spin_us_item (\S+) spins_item (\S+) spin_hit (\S+) park_us_item (\S+) parks_item (\S+) )?.* (\d+) items/s (\S+)% of bound (\S+) µs CPU", l)
        if m:
            r, a, load, rt, n, c, u, sp, sps, hit, pk, pks, ips, pct, cpu = m.groups()
            f = lambda v: float(v) if v is not None else float("nan")
            rows.append(dict(r=int(r), a=a, rt=int(rt) if rt else None, n=int(n), crit=float(c), user=f(u), spin=f(sp), spins=f(sps), park=f(pk), ips=int(ips), cpu=float(cpu)))
    med = lambda xs, k: f"{st.median(x[k] for x in xs):.3f}"
    for cls, f in [("all", lambda x: True), ("near (<200 ns)", lambda x: x["rt"] is not None and x["rt"] < 200), ("far (>=200 ns)", lambda x: x["rt"] is not None and x["rt"] >= 200)]:
        print(f"== {cls}")
        for a in "AB":
            xs = [x for x in rows if x["a"] == a and f(x)]
            if xs:
                print(f"  {a}: runs {len(xs):2d} medians: crit µs/hand-off {med(xs,'crit')} (range {min(x['crit'] for x in xs):.3f}-{max(x['crit'] for x in xs):.3f}), hand-offs/run {med(xs,'n')}, per item µs: CPU {med(xs,'cpu')} user {med(xs,'user')} spin {med(xs,'spin')} park {med(xs,'park')}, spins/item {med(xs,'spins')}, items/s {med(xs,'ips')}")
    by = {}
    for x in rows: by.setdefault(x["r"], {})[x["a"]] = x
    pairs = [(v["A"], v["B"]) for v in by.values() if "A" in v and "B" in v]
    print(f"paired rounds {len(pairs)}: B crit lower in {sum(b['crit'] < a['crit'] for a, b in pairs)}; B CPU/item lower in {sum(b['cpu'] < a['cpu'] for a, b in pairs)}; B items/s higher in {sum(b['ips'] > a['ips'] for a, b in pairs)}; B/A items/s median {st.median(b['ips']/a['ips'] for a, b in pairs):.3f} ({min(b['ips']/a['ips'] for a, b in pairs):.3f}-{max(b['ips']/a['ips'] for a, b in pairs):.3f})")
