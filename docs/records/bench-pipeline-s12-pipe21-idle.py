#!/usr/bin/env python3
"""Session 12 (pipe21): per arm and shape, the pooled note's idle ms and buffers per task over the
4000-item runs of an A/B log written by bench-pipeline-s10-pipe13-ab.sh with PIPELINE_BENCH_REPORT=1
(stdout and stderr to the log).

python3 docs/records/bench-pipeline-s12-pipe21-idle.py LOG...
"""
import re,sys,statistics as st
# per arm and per shape segment (rounds restart at 1): the pooled note's idle ms and buffers per task
# over the 4000-item runs of an A/B log (PIPELINE_BENCH_REPORT=1)
for f in sys.argv[1:]:
    arm=None; segs=[]; last=0; items=None
    for line in open(f):
        m=re.match(r"\S+ round (\d+) arm (\S+) load",line)
        if m:
            r=int(m.group(1)); arm=m.group(2)
            if r<last or not segs: segs.append({})
            last=r; continue
        m=re.match(r"(\d+) rounds in",line)
        if m: items=int(m.group(1)); continue
        m=re.search(r"note: pooled:.*?(?:took ([0-9.]+) buffers.*?)?idle ([0-9.]+) ms",line)
        if m and items==4000:
            d=segs[-1].setdefault(arm,{"idle":[],"per":[]})
            d["idle"].append(float(m.group(2)))
            if m.group(1): d["per"].append(float(m.group(1)))
    for k,res in enumerate(segs):
        print(f"{f} segment {k+1}")
        for a in sorted(res):
            i=res[a]["idle"]; p=res[a]["per"]
            print(f"  {a}: {len(i)} runs idle ms median {st.median(i):.1f} min {min(i):.1f} max {max(i):.1f}" + (f"; buffers/task {min(p):.2f}-{max(p):.2f} median {st.median(p):.2f}" if p else ""))
