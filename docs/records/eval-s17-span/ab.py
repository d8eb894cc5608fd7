import csv,glob,sys
rows={}
for d in sorted(glob.glob('docs/records/eval-s17-span/ab-*-median.csv')):
    f=d
    try: r=list(csv.DictReader(open(f)))
    except FileNotFoundError: continue
    arm=d.split('/')[-1].replace('-median.csv','')
    for x in r:
        if x['policy']!='auto': continue
        rows.setdefault(x['workload'],{})[arm]=(float(x['throughput_vs_oracle']),float(x['p99_turnaround_vs_oracle']),x['threads_created'])
for w,v in rows.items():
    print(w, '  '.join(f"{a}: thr {t:.3f} p99 {p:.3f} thr_created {c}" for a,(t,p,c) in sorted(v.items())))
