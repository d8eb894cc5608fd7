#!/usr/bin/env python3
"""Pack one session-10b pipe14 A/B set (the per-run JSONs and load lines that
bench-pipeline-s10-pipe13-ab.sh, run with BIN=/tmp/pipe14-, wrote to OUTDIR) into the .jsonl format that
bench-pipeline-s10-pipe13-ab-summary.py reads.

python3 docs/records/bench-pipeline-s10-pipe14-ab-pack.py OUTDIR TAG "ARMS NOTE" [BIN] > docs/records/bench-pipeline-s10-pipe14-ab-TAG.jsonl

BIN is the binaries' prefix the runs used: the fourth argument, else the BIN environment variable as
the A/B script takes it, else /tmp/pipe14- (session 11: pipe15 packed with BIN=/tmp/pipe15-, pipe16
with /tmp/pipe16- into bench-pipeline-s11-pipe16-ab-TAG.jsonl).
"""
import glob, json, os, re, sys

out, tag, note = sys.argv[1], sys.argv[2], sys.argv[3]
bin_ = sys.argv[4] if len(sys.argv) > 4 else os.environ.get("BIN", "/tmp/pipe14-")
print(json.dumps({"arms": note, "cmd": f"{bin_}<arm> pipeline --shape <shape> --items 4000 --repeats 5 --json -q --impl tidepool-pipeline-pooled,crossbeam-threads,pariter", "order": "arms alternated, A first in even rounds"}))
for lf in sorted(glob.glob(f"{out}/{tag}-*-load.txt")):
    shape = os.path.basename(lf)[len(tag) + 1:-len("-load.txt")]
    for line in open(lf):
        m = re.match(r"(\S+) round (\d+) arm (\S+) load (.*)$", line.strip())
        utc, r, arm, load = m.groups()
        f = f"{out}/{tag}-{shape}-{arm}-{r}.json"
        if not os.path.exists(f) or os.path.getsize(f) == 0:
            continue
        print(json.dumps({"shape": shape, "arm": arm, "round": int(r), "utc": utc, "loadavg": load, "run": json.load(open(f))}))
