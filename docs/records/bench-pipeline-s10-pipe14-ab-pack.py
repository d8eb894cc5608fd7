#!/usr/bin/env python3
"""Pack one session-10b pipe14 A/B set (the per-run JSONs and load lines that
bench-pipeline-s10-pipe13-ab.sh, run with BIN=/tmp/pipe14-, wrote to OUTDIR) into the .jsonl format that
bench-pipeline-s10-pipe13-ab-summary.py reads.

python3 docs/records/bench-pipeline-s10-pipe14-ab-pack.py OUTDIR TAG "ARMS NOTE" [BIN | CMD] > docs/records/bench-pipeline-s10-pipe14-ab-TAG.jsonl

The header records the command the set ran. The optional fourth argument is either BIN, the binaries'
prefix (one word, no space: session 11's pipe16 packed with /tmp/pipe16-), which fills in pipe14's pooled
command, or CMD, a whole command (it has a space: session 11's pipe17 named /tmp/pipe17-<arm> and the
thread-per-stage row's --impl list). Without it, the BIN environment variable as the A/B script takes it
(pipe15: BIN=/tmp/pipe15-), else /tmp/pipe14-.
"""
import glob, json, os, re, sys

out, tag, note = sys.argv[1], sys.argv[2], sys.argv[3]
arg = sys.argv[4] if len(sys.argv) > 4 else os.environ.get("BIN", "/tmp/pipe14-")
cmd = arg if " " in arg else f"{arg}<arm> pipeline --shape <shape> --items 4000 --repeats 5 --json -q --impl tidepool-pipeline-pooled,crossbeam-threads,pariter"
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
