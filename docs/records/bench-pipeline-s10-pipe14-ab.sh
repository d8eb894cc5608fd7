#!/bin/bash
# Session 10b (branch pipe14; pipe13s script, binaries /tmp/pipe14-ARM): interleaved A/B of tidepool-bench builds copied to /tmp/pipe13-<ARM>,
# arms rotated per round (sets c3, d4, e5; sets b1 and b2 ran the same command with two arms,
# A first in odd rounds and B first in even ones). One JSON per run in OUTDIR, the load average
# per run in OUTDIR/TAG-SHAPE-load.txt. docs/benchmarks.md, "Session 10".
# usage: run3.sh SHAPE ROUNDS ITEMS OUTDIR TAG "A B C" [IMPLS]
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
