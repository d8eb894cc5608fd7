#!/bin/bash
# Session 13 (pipe22). usage: [BIN=/tmp/pipe22-diag2] bench-pipeline-s13-pipe22-crit.sh ROUNDS OUT: alternate ${BIN}A and ${BIN}B (A first in odd
# rounds), one balanced-compute-multistage run of 4000 items each (pooled only), the round trip (/tmp/pingpong) before each.
# Set 1 ran it with BIN=/tmp/pipe22-diag (the crit counter only, tail -2 of the output), set 2 with /tmp/pipe22-diag2.
rounds=$1; out=$2
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) = 1 ]; then arms="A B"; else arms="B A"; fi
  for a in $arms; do
    rt=$(timeout 4 /tmp/pingpong | grep -oE "median [0-9]+" | cut -d' ' -f2)
    res=$(${BIN:-/tmp/pipe22-diag2}$a pipeline --shape balanced-compute-multistage --items 4000 --repeats 1 -q --impl tidepool-pipeline-pooled 2>&1 | grep -E "DIAG|pooled " | tail -3 | tr -s ' ' | tr '\n' ' ')
    echo "$(date -u +%T) round $r arm $a load $(cut -d' ' -f1 /proc/loadavg) rt $rt | $res"
  done
done | tee $out
