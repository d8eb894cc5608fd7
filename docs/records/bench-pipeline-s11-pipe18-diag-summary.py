#!/usr/bin/env python3
"""Session 11 (pipe18): per-invocation summary of bench-pipeline-s11-pipe18-diag.txt (see its header)."""
import re, sys, statistics as st
# Per invocation (## header), the measured pooled runs' per-task means (tasks > 3000 per worker; warm-ups of 400 items left out),
# weighted by tasks over both workers.
inv = []
cur = None
for line in open(sys.argv[1]):
    if line.startswith("## ") and "end" not in line:
        cur = {"hdr": line.strip(), "w": [], "res": []}; inv.append(cur); w = None; continue
    m = re.match(r"DIAG (\S+) tasks (\d+) .*spins (\d+) hit (\d+) parks (\d+) \| us/task: user ([\d.]+) spin ([\d.]+) park ([\d.]+) locked\(other\) ([\d.]+) wall ([\d.]+) cpu ([\d.]+)", line)
    if m:
        w = dict(name=m[1], tasks=int(m[2]), spins=int(m[3]), hit=int(m[4]), parks=int(m[5]), user=float(m[6]), spin=float(m[7]), park=float(m[8]), fw=float(m[9]), wall=float(m[10]), cpu=float(m[11]))
        cur["w"].append(w); continue
    m = re.search(r"IDLE \S+ episodes (\d+) idle_us/task ([\d.]+) handoff_us/task ([\d.]+)", line)
    if m and w: w.update(episodes=int(m[1]), idle=float(m[2]), handoff=float(m[3]))
    m = re.search(r"LOCKWAIT after task: us/task ([\d.]+) hist .*: \[(\d+), (\d+), (\d+), (\d+)\].*us/task ([\d.]+)", line)
    if m and w: w.update(lockwait=float(m[1]), crit=float(m[6]), contended=int(m[3]) + int(m[4]) + int(m[5]))
    m = re.search(r"BOTH idle episodes (\d+)", line)
    if m and w: w.update(both=int(m[1]))
    if "items/s" in line and "bound" in line and "oracle" not in line and cur is not None:
        cur["res"].append(line.strip())
    if "oracle" in line and cur is not None:
        cur["res"].append(line.strip())
keys = ["user", "fw", "crit", "lockwait", "spin", "park", "wall", "cpu"]
for c in inv:
    ws = [w for w in c["w"] if w["tasks"] > 3000]
    T = sum(w["tasks"] for w in ws)
    print(c["hdr"])
    for r in c["res"]: print("   ", r[:150])
    print(f"    measured worker-runs {len(ws)}, tasks {T}; per task (µs, weighted): " + ", ".join(f"{k} {sum(w[k]*w['tasks'] for w in ws)/T:.3f}" for k in keys))
    print(f"    per worker-run, min-max: " + ", ".join(f"{k} {min(w[k] for w in ws):.2f}-{max(w[k] for w in ws):.2f}" for k in keys))
    print(f"    idle episodes per 1000 tasks {1000*sum(w['episodes'] for w in ws)/T:.1f}, parks {1000*sum(w['parks'] for w in ws)/T:.2f}, spins {1000*sum(w['spins'] for w in ws)/T:.1f} (ending with epoch moved {sum(w['hit'] for w in ws)}/{sum(w['spins'] for w in ws)}); lock waits >0.2us per 1000 tasks {1000*sum(w['contended'] for w in ws)/T:.1f}; both-idle episodes {sum(w['both'] for w in ws)}")
