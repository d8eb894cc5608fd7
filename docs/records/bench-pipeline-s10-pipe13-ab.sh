#!/bin/bash
# Session 10 (branches pipe13 and pipe14): interleaved A/B of tidepool-bench builds copied to
# ${BIN}<ARM> (BIN defaults to /tmp/pipe13-; pipe14 ran it with BIN=/tmp/pipe14-), arms rotated per
# round (pipe13's sets c3, d4, e5; its sets b1 and b2 ran the same command with two arms, A first in
# odd rounds and B first in even ones; pipe14's sets w1 and c2, two arms). One JSON per run in
# OUTDIR, the load average per run in OUTDIR/TAG-SHAPE-load.txt. docs/benchmarks.md, "Session 10"
# and "Session 10b".
# Session 11 (pipe17) runs it with BIN=/tmp/pipe17- and IMPLS=tidepool-pipeline,crossbeam-threads,pariter (the
# thread-per-stage row).
# Session 11 (pipe18) runs it with PP set: before each run, the two vCPUs' cache-line round trip
# (PP, built from bench-pipeline-s11-pipe18-pingpong.rs with rustc -O) goes at the end of the round's
# load line, "... load <loadavg> rt <median ns>" (the pack and summary scripts read the line as before).
# usage: [BIN=/tmp/pipe14-] [PP=/tmp/p18/pingpong] bench-pipeline-s10-pipe13-ab.sh SHAPE ROUNDS ITEMS OUTDIR TAG "A B C" [IMPLS]
shape=$1; rounds=$2; items=$3; out=$4; tag=$5; arms=($6); impls=${7:-tidepool-pipeline-pooled,crossbeam-threads,pariter}
mkdir -p $out
n=${#arms[@]}
for r in $(seq 1 $rounds); do
  for k in $(seq 0 $((n-1))); do
    arm=${arms[$(( (k + r) % n ))]}
    rt=""
    [ -n "$PP" ] && rt=" rt $($PP | grep -oE "median [0-9]+" | cut -d' ' -f2)"
    echo "$(date -u +%T) round $r arm $arm load $(cat /proc/loadavg)$rt" | tee -a $out/$tag-$shape-load.txt
    ${BIN:-/tmp/pipe13-}$arm pipeline --shape $shape --items $items --repeats 5 --json -q --impl $impls > $out/$tag-$shape-$arm-$r.json
  done
done
