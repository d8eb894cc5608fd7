#!/bin/bash
# Session 11 (pipe18): bench-pipeline-s10-pipe13-ab.sh with, in every round's load line, the two vCPUs' cache-line round trip
# measured just before the run (PP, default /tmp/p18/pingpong, built from bench-pipeline-s11-pipe18-pingpong.rs with rustc -O):
# "... load <loadavg> rt <median ns>". The pack and summary scripts read the line as before (the summary takes the first number).
# usage: BIN=/tmp/pipe18- bench-pipeline-s11-pipe18-ab.sh SHAPE ROUNDS ITEMS OUTDIR TAG "A B" [IMPLS]
shape=$1; rounds=$2; items=$3; out=$4; tag=$5; arms=($6); impls=${7:-tidepool-pipeline-pooled,crossbeam-threads,pariter}
mkdir -p $out
n=${#arms[@]}
for r in $(seq 1 $rounds); do
  for k in $(seq 0 $((n-1))); do
    arm=${arms[$(( (k + r) % n ))]}
    rt=$(${PP:-/tmp/p18/pingpong} | grep -oE "median [0-9]+" | cut -d' ' -f2)
    echo "$(date -u +%T) round $r arm $arm load $(cat /proc/loadavg) rt $rt" | tee -a $out/$tag-$shape-load.txt
    ${BIN:-/tmp/pipe18-}$arm pipeline --shape $shape --items $items --repeats 5 --json -q --impl $impls > $out/$tag-$shape-$arm-$r.json
  done
done
