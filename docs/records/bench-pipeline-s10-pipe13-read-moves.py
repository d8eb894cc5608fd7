import sys,re,statistics as st
# readgap.py TRACE T0 SITES...: reads = clock_nanosleep calls at the given sites, from time T0 on;
# the read stage is serial, so gap = next read's call - this read's return, across threads; split by
# whether the same thread made both reads.
# A site is tid:offset (pipe13, session 10), or (pipe16, session 11) offset alone (any thread) or
# main:offset (the process's first thread only), offset being the low 3 hex digits of the sleep's rqtp.
# With T0 = 0 the reads are split into runs at gaps of > 20 ms (the bench's warm-up run, then the
# measured one) and only the last run is counted.
rx=re.compile(r"^\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_clock_nanosleep:(.*)$")
f,t0=sys.argv[1],float(sys.argv[2]); sites=set(sys.argv[3:])
main=min((m.group(2) for m in map(rx.match, open(f)) if m), key=int)
reads=[]; cur={}
for line in open(f):
    m=rx.match(line)
    if not m: continue
    comm,tid,t,kind,rest=m.groups(); t=float(t)
    if t<t0: continue
    if kind=="enter":
        rq=re.search(r"rqtp: (0x[0-9a-f]+)",rest).group(1)[-3:]
        if f"{tid}:{rq}" in sites or rq in sites or (tid==main and f"main:{rq}" in sites): cur[tid]=t
    elif tid in cur:
        reads.append((cur.pop(tid),t,tid))
reads.sort()
if t0==0:
    runs=[[reads[0]]]
    for a,b in zip(reads,reads[1:]):
        if b[0]-a[1]>0.02: runs.append([])
        runs[-1].append(b)
    print("runs (reads each):", [len(x) for x in runs]); reads=runs[-1]
stay=[];move=[]
for a,b in zip(reads,reads[1:]):
    g=(b[0]-a[1])*1e6
    (stay if a[2]==b[2] else move).append(g)
allg=stay+move
def d(x): x=sorted(x); return f"n {len(x)} mean {st.mean(x):.1f} median {st.median(x):.1f} p90 {x[int(.9*len(x))]:.1f} sum {sum(x)/1e3:.1f} ms" if x else "n 0"
span=(reads[-1][1]-reads[0][0])*1e6
print(f"reads {len(reads)} on {len(set(r[2] for r in reads))} threads; per read {span/len(reads):.1f} us; read call mean {st.mean([(b-a)*1e6 for a,b,_ in reads]):.1f}")
print("all  ",d(allg)); print("stay ",d(stay)); print("move ",d(move))
