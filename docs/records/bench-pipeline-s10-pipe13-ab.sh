#!/bin/bash
# Session 10 (branches pipe13 and pipe14): interleaved A/B of tidepool-bench builds copied to
# ${BIN}<ARM> (BIN defaults to /tmp/pipe13-; pipe14 ran it with BIN=/tmp/pipe14-), arms rotated per
# round (pipe13's sets c3, d4, e5; its sets b1 and b2 ran the same command with two arms, A first in
# odd rounds and B first in even ones; pipe14's sets w1 and c2, two arms). One JSON per run in
# OUTDIR, the load average per run in OUTDIR/TAG-SHAPE-load.txt. docs/benchmarks.md, "Session 10"
# and "Session 10b".
# Session 11 (pipe17) runs it with BIN=/tmp/pipe17- and IMPLS=tidepool-pipeline,crossbeam-threads,pariter (the
# thread-per-stage row).
# usage: [BIN=/tmp/pipe14-] bench-pipeline-s10-pipe13-ab.sh SHAPE ROUNDS ITEMS OUTDIR TAG "A B C" [IMPLS]
shape=$1; rounds=$2; items=$3; out=$4; tag=$5; arms=($6); impls=${7:-tidepool-pipeline-pooled,crossbeam-threads,pariter}
mkdir -p $out
n=${#arms[@]}
for r in $(seq 1 $rounds); do
  for k in $(seq 0 $((n-1))); do
    arm=${arms[$(( (k + r) % n ))]}
    echo "$(date -u +%T) round $r arm $arm load $(cat /proc/loadavg)" | tee -a $out/$tag-$shape-load.txt
    ${BIN:-/tmp/pipe13-}$arm pipeline --shape $shape --items $items --repeats 5 --json -q --impl $impls > $out/$tag-$shape-$arm-$r.json
  done
done
