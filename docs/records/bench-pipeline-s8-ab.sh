#!/bin/bash
# bench-pipeline-s8-ab.sh OUT.jsonl ROUNDS ARM... : alternating rounds of the whole pipeline bench,
# one invocation per arm (the arm chosen by TIDEPOOL_PIPE_WAIT in the A/B build), the arm order
# reversed every other round; each invocation is one JSON line with its arm, round and the load
# average before and after. BIN defaults to /tmp/pipe10-bench (a copy outside /work/wt, so the
# watcher does not renice it), BIN_<arm> overrides it per arm; REPEATS defaults to 3.
out=$1; rounds=$2; shift 2
# Absolute nice 0 (the shell that starts this may be at the watcher's 19; run it from /tmp).
renice -n 0 -p $$ > /dev/null
cd /tmp
bin=${BIN:-/tmp/pipe10-bench}
arms=("$@")
for r in $(seq 1 $rounds); do
  if (( r % 2 == 0 )); then order=$(printf '%s\n' "${arms[@]}" | tac); else order=$(printf '%s\n' "${arms[@]}"); fi
  for a in $order; do
    lb=$(cut -d' ' -f1 /proc/loadavg)
    echo "$(date -u +%T) round $r arm $a load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out.log
    b=BIN_$a; b=${!b:-$bin}   # BIN_<arm>=PATH: a binary per arm (set 4: two builds)
    TIDEPOOL_PIPE_WAIT=$a nice -n 0 $b pipeline --items 4000 --repeats ${REPEATS:-3} --json -q > /tmp/s8-one.json 2>>$out.log
    la=$(cut -d' ' -f1 /proc/loadavg)
    python3 -c "import json,sys; j=json.load(open('/tmp/s8-one.json')); j.update(arm='$a', round=$r, load_before=$lb, load_after=$la); print(json.dumps(j))" >> $out
  done
done
echo "$(date -u +%T) done load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out.log
