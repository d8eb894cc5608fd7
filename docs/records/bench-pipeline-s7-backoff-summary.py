"""Summary of docs/records/bench-pipeline-s7-backoff-ab{1,2}.jsonl (session 7).

Usage: python3 bench-pipeline-s7-backoff-summary.py FILE.jsonl
Per shape and arm, over the rounds: tidepool's % of the bound (median of the
invocation's repeats), tidepool / best peer (every repeat, and the per-round
medians), CPU µs and switches per item, the best peer's, the oracle's % of bound.
"""
import json, sys, statistics as st, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
loads = []
for line in open(sys.argv[1]):
    j = json.loads(line); arm = j['arm']
    loads += [j['load_before'], j['load_after']]
    for s in j['scenarios']:
        R = rows[(s['name'], arm)]
        t = [x for x in s['results'] if x['impl'] == 'tidepool-pipeline'][0]
        R['bound'].append(100 * t['of_bound'])
        R['ratio'] += s['tidepool_over_best_peer']
        R['ratio_med'].append(st.median(s['tidepool_over_best_peer']))
        R['cpu'].append(t['cpu_us_per_item']); R['sw'].append(t['switches_per_item']); R['vsw'].append(t['voluntary_switches_per_item'])
        R['oracle'].append(100 * s['oracle_items_per_sec'] / s['bound_items_per_sec'])
        peers = [x for x in s['results'] if x['impl'] not in ('tidepool-pipeline',)]
        best = max(peers, key=lambda x: x['items_per_sec'])
        R['best'].append(100 * best['of_bound']); R['bestname'].append(best['impl'])
        R['bestcpu'].append(best['cpu_us_per_item']); R['bestsw'].append(best['switches_per_item'])
def mr(v, f='%.1f'):
    return (f + ' (' + f + '–' + f + ')') % (st.median(v), min(v), max(v))
print('load range %.2f–%.2f' % (min(loads), max(loads)))
print('| shape | arm | rounds | tidepool % of bound | ÷ best peer, all repeats | ÷ best peer, per-round medians | CPU µs/item | switches/item (voluntary) | best peer % of bound (who) | best peer CPU, sw | oracle % |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for (shape, arm), R in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    who = collections.Counter(R['bestname']).most_common(1)[0][0]
    print(f"| {shape} | {arm} | {len(R['bound'])} | {mr(R['bound'])} | {mr(R['ratio'],'%.3f')} | {mr(R['ratio_med'],'%.3f')} | {mr(R['cpu'])} | {st.median(R['sw']):.2f} ({st.median(R['vsw']):.2f}) | {st.median(R['best']):.1f} ({who}) | {st.median(R['bestcpu']):.1f}, {st.median(R['bestsw']):.2f} | {st.median(R['oracle']):.1f} |")
