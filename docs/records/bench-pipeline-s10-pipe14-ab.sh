#!/bin/bash
# Session 10b (branch pipe14), pipe13's A/B script with the binaries at /tmp/pipe14-<ARM>: interleaved
# A/B of tidepool-bench builds, arms rotated per round (two arms: the second first in odd rounds, A
# first in even ones). One JSON per run in OUTDIR, the load average per run in OUTDIR/TAG-SHAPE-load.txt;
# packed with bench-pipeline-s10-pipe14-ab-pack.py. docs/benchmarks.md, "Session 10b".
# usage: bench-pipeline-s10-pipe14-ab.sh SHAPE ROUNDS ITEMS OUTDIR TAG "A B" [IMPLS]
shape=$1; rounds=$2; items=$3; out=$4; tag=$5; arms=($6); impls=${7:-tidepool-pipeline-pooled,crossbeam-threads,pariter}
mkdir -p $out
n=${#arms[@]}
for r in $(seq 1 $rounds); do
  for k in $(seq 0 $((n-1))); do
    arm=${arms[$(( (k + r) % n ))]}
    echo "$(date -u +%T) round $r arm $arm load $(cat /proc/loadavg)" | tee -a $out/$tag-$shape-load.txt
    /tmp/pipe14-$arm pipeline --shape $shape --items $items --repeats 5 --json -q --impl $impls > $out/$tag-$shape-$arm-$r.json
  done
done
