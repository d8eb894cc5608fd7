#!/bin/bash
# ab.sh OUTDIR ROUNDS ARM... : alternating rounds of the whole pipeline bench, one invocation per arm,
# the arm chosen by TIDEPOOL_PIPE_WAIT; order reversed every other round.
out=$1; rounds=$2; shift 2
mkdir -p $out
arms=("$@")
for r in $(seq 1 $rounds); do
  if (( r % 2 == 0 )); then order=$(printf '%s\n' "${arms[@]}" | tac); else order=$(printf '%s\n' "${arms[@]}"); fi
  for a in $order; do
    echo "$(date -u +%T) round $r arm $a load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log
    env TIDEPOOL_PIPE_WAIT=$a $( [ $a = eager ] && echo TIDEPOOL_PIPE_EAGER_FREE=1 ) nice -n 0 /work/wt/pipe9/target/release/tidepool-bench pipeline --items 4000 --repeats ${REPEATS:-3} --json ${EXTRA} > $out/r$r-$a.json 2>>$out/err
  done
done
echo "$(date -u +%T) done load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log
