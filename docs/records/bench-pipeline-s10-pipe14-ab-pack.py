#!/usr/bin/env python3
"""Pack one session-10b pipe14 A/B set (the per-run JSONs and load lines that
bench-pipeline-s10-pipe13-ab.sh, run with BIN=/tmp/pipe14-, wrote to OUTDIR) into the .jsonl format that
bench-pipeline-s10-pipe13-ab-summary.py reads.

python3 docs/records/bench-pipeline-s10-pipe14-ab-pack.py OUTDIR TAG "ARMS NOTE" [CMD] > docs/records/bench-pipeline-s10-pipe14-ab-TAG.jsonl

CMD (optional) is the command the set ran, recorded in the header (default: pipe14's). Session 11's pipe17 packs
its sets with this script too (CMD names /tmp/pipe17-<arm> and the thread-per-stage row's --impl list).
"""
import glob, json, os, re, sys

out, tag, note = sys.argv[1], sys.argv[2], sys.argv[3]
cmd = sys.argv[4] if len(sys.argv) > 4 else "/tmp/pipe14-<arm> pipeline --shape <shape> --items 4000 --repeats 5 --json -q --impl tidepool-pipeline-pooled,crossbeam-threads,pariter"
print(json.dumps({"arms": note, "cmd": cmd, "order": "arms alternated, A first in even rounds"}))
for lf in sorted(glob.glob(f"{out}/{tag}-*-load.txt")):
    shape = os.path.basename(lf)[len(tag) + 1:-len("-load.txt")]
    for line in open(lf):
        m = re.match(r"(\S+) round (\d+) arm (\S+) load (.*)$", line.strip())
        utc, r, arm, load = m.groups()
        f = f"{out}/{tag}-{shape}-{arm}-{r}.json"
        if not os.path.exists(f) or os.path.getsize(f) == 0:
            continue
        print(json.dumps({"shape": shape, "arm": arm, "round": int(r), "utc": utc, "loadavg": load, "run": json.load(open(f))}))
