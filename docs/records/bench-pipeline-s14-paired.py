#!/usr/bin/env python3
"""Session 14: pooled against each peer, paired per repeat (the two ran in the same repeat, one
after the other), over one or more `tidepool-bench pipeline --json` outputs.

For each shape and peer: the per-repeat ratio pooled items/s / peer items/s; its median and
geometric mean, each with a 95% bootstrap interval (10,000 resamples of the repeats, fixed
seed), and how many repeats pooled won (with a two-sided sign-test p-value). "best peer" is the
per-repeat maximum over the peers, which is biased against any one row: with two peers of equal
mean and per-repeat spread s, the maximum's mean is about 0.56 s higher.

python3 docs/records/bench-pipeline-s14-paired.py FILE.json [FILE.json ...]
python3 docs/records/bench-pipeline-s14-paired.py --arm A SET.jsonl   # one arm of a packed A/B set
python3 docs/records/bench-pipeline-s14-paired.py --row tidepool-pipeline FILE.json  # another row (session 17)
"""
import json, math, random, statistics as st, sys

ROW = "tidepool-pipeline-pooled"
PEERS = ["crossbeam-threads", "pariter", "pipeliner"]


def sign_p(wins, n):
    k = min(wins, n - wins)
    p = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * p)


def boot(v, f, rng, b=10_000):
    xs = sorted(f([rng.choice(v) for _ in v]) for _ in range(b))
    return xs[int(0.025 * b)], xs[int(0.975 * b) - 1]


def gmean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))


args = sys.argv[1:]
arm = None
if args[:1] == ["--arm"]:
    arm, args = args[1], args[2:]
if args[:1] == ["--row"]:
    ROW, args = args[1], args[2:]


def runs(path):
    """The bench outputs in a file: a JSON, or an A/B set's packed runs of one arm."""
    if path.endswith(".jsonl"):
        lines = [json.loads(l) for l in open(path)][1:]
        return [l["run"] for l in lines if arm is None or l["arm"] == arm]
    return [json.load(open(path))]


ratios = {}
for sc in (sc for path in args for run in runs(path) for sc in run["scenarios"]):
    res = {r["impl"]: r["repeats"] for r in sc["results"]}
    if ROW not in res:
        continue
    peers = [p for p in PEERS if p in res]
    for i, mine in enumerate(res[ROW]):
        for p in peers:
            ratios.setdefault((sc["name"], p), []).append(mine / res[p][i])
        best = max(res[p][i] for p in peers)
        ratios.setdefault((sc["name"], "best peer"), []).append(mine / best)

rng = random.Random(14)
print(f"| shape | {ROW} ÷ | repeats | median (95% CI) | geometric mean (95% CI) | won | sign-test p |")
print("|---|---|---:|---|---|---|---:|")
for (shape, peer), v in sorted(ratios.items()):
    lo, hi = boot(v, st.median, rng)
    glo, ghi = boot(v, gmean, rng)
    w = sum(x > 1 for x in v)
    print(f"| {shape} | {peer} | {len(v)} | {st.median(v):.3f} ({lo:.3f}–{hi:.3f}) | "
          f"{gmean(v):.3f} ({glo:.3f}–{ghi:.3f}) | {w} of {len(v)} | {sign_p(w, len(v)):.3f} |")
