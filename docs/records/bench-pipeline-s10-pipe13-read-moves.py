import sys,re,statistics as st
# readgap.py TRACE T0 SITES...: reads = clock_nanosleep calls at the given (tid:offset) sites, from time T0 on;
# the read stage is serial, so gap = next read's call - this read's return, across threads; split by
# whether the same thread made both reads.
rx=re.compile(r"^\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_clock_nanosleep:(.*)$")
f,t0=sys.argv[1],float(sys.argv[2]); sites=set(sys.argv[3:])
reads=[]; cur={}
for line in open(f):
    m=rx.match(line)
    if not m: continue
    comm,tid,t,kind,rest=m.groups(); t=float(t)
    if t<t0: continue
    if kind=="enter":
        rq=re.search(r"rqtp: (0x[0-9a-f]+)",rest).group(1)[-3:]
        if f"{tid}:{rq}" in sites: cur[tid]=t
    elif tid in cur:
        reads.append((cur.pop(tid),t,tid))
reads.sort()
stay=[];move=[]
for a,b in zip(reads,reads[1:]):
    g=(b[0]-a[1])*1e6
    (stay if a[2]==b[2] else move).append(g)
allg=stay+move
def d(x): x=sorted(x); return f"n {len(x)} mean {st.mean(x):.1f} median {st.median(x):.1f} p90 {x[int(.9*len(x))]:.1f} sum {sum(x)/1e3:.1f} ms" if x else "n 0"
span=(reads[-1][1]-reads[0][0])*1e6
print(f"reads {len(reads)}; per read {span/len(reads):.1f} us; read call mean {st.mean([(b-a)*1e6 for a,b,_ in reads]):.1f}")
print("all  ",d(allg)); print("stay ",d(stay)); print("move ",d(move))
