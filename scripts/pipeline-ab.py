#!/usr/bin/env python3
"""Interleaved A/B of tidepool-pipeline builds on one pipeline shape.

Usage: scripts/pipeline-ab.py SHAPE ROUNDS ITEMS NAME@BINARY[,NAME@BINARY...]

Each round runs every arm once, in a shuffled order, as
`nice -n -19 perf stat -e context-switches,cpu-migrations BINARY pipeline
--impl tidepool-pipeline --shape SHAPE --items ITEMS --repeats 1 -q --json`
and appends one JSON line per run to pipeline-ab-SHAPE.jsonl: items/s,
the bound, the interleaved oracle's items/s and CPU per item, the run's
CPU per item, context switches, migrations, and the load average.
Idle per item is 2 cores / items/s - CPU per item (docs/benchmarks.md).
"""
import json
import os
import random
import subprocess
import sys

shape, rounds, items = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
arms = [a.split("@", 1) for a in sys.argv[4].split(",")]
with open(f"pipeline-ab-{shape}.jsonl", "a") as out:
    for _ in range(rounds):
        random.shuffle(arms)
        for name, binary in arms:
            p = subprocess.run(
                ["nice", "-n", "-19", "perf", "stat", "-x,", "-e",
                 "context-switches,cpu-migrations", binary, "pipeline",
                 "--impl", "tidepool-pipeline", "--shape", shape,
                 "--items", str(items), "--repeats", "1", "-q", "--json"],
                capture_output=True, text=True, check=True, env=os.environ)
            j = json.loads(p.stdout)
            s = j["scenarios"][0]
            t = s["results"][0]
            ev = {}
            for line in p.stderr.splitlines():
                f = line.split(",")
                if len(f) > 2 and f[0].strip().isdigit():
                    ev[f[2]] = int(f[0])
            rec = dict(arm=name, shape=shape, items=items,
                       ips=t["items_per_sec"], bound=s["bound_items_per_sec"],
                       oracle=s["oracle_items_per_sec"],
                       cpu=t["cpu_us_per_item"],
                       ocpu=s["oracle_cpu_us_per_item"],
                       cs=ev.get("context-switches"),
                       mig=ev.get("cpu-migrations"), load=j["load_before"])
            out.write(json.dumps(rec) + "\n")
            out.flush()
