#!/usr/bin/env python3
"""Session 11 (pipe18): idle episodes of bench-pipeline-s11-pipe18-diag.txt by why nothing was runnable."""
import re, sys, collections
# Idle episodes by why nothing was runnable, summed over the measured worker-runs (> 3000 tasks) of a diag file.
agg = collections.defaultdict(lambda: [0, 0.0, 0.0, []])
keep = False; T = 0
for line in open(sys.argv[1]):
    m = re.match(r"DIAG \S+ tasks (\d+)", line)
    if m:
        keep = int(m[1]) > 3000; T += int(m[1]) if keep else 0; continue
    m = re.search(r"held (\d+) input (\d+) free (\d+) prev (-?\d+) : n (\d+) avg_us ([\d.]+) handoff_avg_us ([\d.]+)", line)
    if m and keep:
        held, inp, free = m[1], m[2], int(m[3])
        names = ["read", "a", "b", "write"]
        hg = [names[i] for i in range(4) if held[3 - i] == "1"]
        cat = f"other worker holds {'+'.join(hg)}; only it has input; free pool {'empty' if free == 0 else str(free)}" if held == inp else f"held {held} input {inp} free {free}"
        n, avg, ho = int(m[5]), float(m[6]), float(m[7])
        a = agg[cat]; a[0] += n; a[1] += n * avg; a[2] += n * ho; a[3].append(avg)
print(f"measured tasks {T}")
for cat, (n, tot, ho, avgs) in sorted(agg.items(), key=lambda x: -x[1][1]):
    print(f"{cat:70s} episodes {n:4d}  idle {tot/1000:8.2f} ms = {tot/T:.3f} us/task  mean {tot/n:8.1f} us  hand-off mean {ho/n:6.2f} us")
