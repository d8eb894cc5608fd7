import sys,re,statistics as st,collections
# The reader: the thread whose first clock_nanosleep in the pipeline run is a read (the run's first
# non-oracle sleep site); reports its sleeps and the gap from one sleep's exit to its next enter.
rx=re.compile(r"^\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_clock_nanosleep:(.*)$")
ev=[]
for line in open(sys.argv[1]):
    m=rx.match(line)
    if m:
        comm,tid,t,kind,rest=m.groups(); rq=re.search(r"rqtp: (0x[0-9a-f]+)",rest)
        ev.append((float(t)*1e6,tid,kind,rq.group(1)[-3:] if rq else None))
last_exit={}; cur={}; gaps=collections.defaultdict(list); durs=collections.defaultdict(list)
for t,tid,kind,rq in ev:
    if kind=="enter":
        site=(tid,rq)
        if tid in last_exit and last_exit[tid][1]==site: gaps[site].append(t-last_exit[tid][0])
        cur[tid]=(t,site)
    elif tid in cur:
        t0,site=cur.pop(tid); durs[site].append(t-t0); last_exit[tid]=(t,site)
# reader site: the most frequent site whose gaps have a median under 30 µs (the oracle threads compute 60 µs between sleeps)
# and that is not the 400-sleep measure_block; pick the site with the most sleeps.
cands=[s for s in durs if len(durs[s])>=500 and gaps[s] and st.median(gaps[s])<30]
for s in sorted(cands,key=lambda s:-len(durs[s]))[:2]:
    g=sorted(gaps[s]); d=durs[s]
    print(f"site {s} sleeps {len(d)} sleep mean {st.mean(d):.1f} median {st.median(d):.1f} | gap mean {st.mean(g):.1f} median {st.median(g):.1f} p90 {g[int(.9*len(g))]:.1f} p99 {g[int(.99*len(g))]:.1f} over40 {100*sum(x>40 for x in g)/len(g):.1f}%")
