"""Per-round view of docs/records/bench-pipeline-s8-ab*.jsonl (session 8).

Usage: python3 bench-pipeline-s8-rounds.py FILE.jsonl ARM_A ARM_B
Per shape: tidepool / best peer (median of the invocation's repeats) as A/B per round,
and how many rounds A is ahead. The whole-table summary is bench-pipeline-s7-backoff-summary.py.
"""
import json, sys, statistics as st, collections
f, A, B = sys.argv[1:4]
v = collections.defaultdict(dict)
for line in open(f):
    j = json.loads(line)
    for s in j['scenarios']:
        v[(s['name'], j['round'])][j['arm']] = st.median(s['tidepool_over_best_peer'])
shapes = sorted({k[0] for k in v}); rounds = sorted({k[1] for k in v})
print('| shape | ' + ' | '.join(f'round {r}' for r in rounds) + f' | {A} ahead |')
print('|---|' + '---|' * (len(rounds) + 1))
for sh in shapes:
    cells, ahead = [], 0
    for r in rounds:
        d = v[(sh, r)]
        if A in d and B in d:
            cells.append(f"{d[A]:.3f}/{d[B]:.3f}"); ahead += d[A] > d[B]
        else:
            cells.append('—')
    print(f'| {sh} | ' + ' | '.join(cells) + f' | {ahead} of {len(rounds)} |')
