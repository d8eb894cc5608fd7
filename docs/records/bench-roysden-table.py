# The tables of a `tidepool-bench roysden --json` record, in the layout of docs/pipelines.md.
# Usage: python3 docs/records/bench-roysden-table.py FILE
import json,sys
r=json.load(open(sys.argv[1]))
print(f"Linux {r['kernel']}, {r['runs']} interleaved runs per arm, load average {r['load'][0]:.1f} before / {r['load'][1]:.1f} after")
for v in r['variants']:
    print(f"\n{v['variant']}: {v['size']['blocks']} blocks of {v['size']['pages']*4} KiB, direct={v['direct_io']}\n")
    print("| Scheduling | Obs. | User s | System s | Clock s (± s.e.) | CPU % | clock vs default, 95% CI | Welch p |")
    print("|---|---|---|---|---|---|---|---|")
    for a in v['arms']:
        w=a['vs_default']
        cmp = "—" if not w else f"{w['diff_pct']:+.1f}% ({w['ci95_pct'][0]:+.1f} … {w['ci95_pct'][1]:+.1f})"
        p = "—" if not w else (f"{w['p']:.3f}" if w['p']>=1e-4 else "< 0.0001")
        print(f"| {a['arm']['name']} | {len(a['runs'])} | {a['user']:.3f} | {a['sys']:.3f} | {a['wall']:.4f} ± {a['wall_se']:.4f} | {a['cpu_pct']:.0f} | {cmp} | {p} |")
