# Session 11 (pipe16): python3 docs/records/bench-pipeline-s11-pipe16-read-write-overlap.py X.txt <read sites> -- <write sites>, on the traces of bench-pipeline-s11-pipe16-read-moves.txt (sites listed there).
# overlap.py TRACE READSITES -- WRITESITES: for each move of the reading role (consecutive reads on
# different threads), how much of its gap the write stage was also idle (no write call in progress).
import sys,re
rx=re.compile(r"^\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_clock_nanosleep:(.*)$")
f=sys.argv[1]; i=sys.argv.index("--"); rs=set(sys.argv[2:i]); ws=set(sys.argv[i+1:])
main=min((m.group(2) for m in map(rx.match, open(f)) if m), key=int)
def calls(sites):
    out=[]; cur={}
    for line in open(f):
        m=rx.match(line)
        if not m: continue
        comm,tid,t,kind,rest=m.groups(); t=float(t)
        if kind=="enter":
            rq=re.search(r"rqtp: (0x[0-9a-f]+)",rest).group(1)[-3:]
            if rq in sites or (tid==main and f"main:{rq}" in sites): cur[tid]=t
        elif tid in cur: out.append((cur.pop(tid),t,tid))
    out.sort()
    runs=[[out[0]]]
    for a,b in zip(out,out[1:]):
        if b[0]-a[1]>0.02: runs.append([])
        runs[-1].append(b)
    return runs[-1]
R=calls(rs); W=calls(ws)
def busy(lo,hi):  # time in [lo,hi] covered by write calls
    return sum(max(0,min(hi,b)-max(lo,a)) for a,b,_ in W if b>lo and a<hi)
mv=[(a[1],b[0]) for a,b in zip(R,R[1:]) if a[2]!=b[2]]
tot=sum(h-l for l,h in mv); idle=sum((h-l)-busy(l,h) for l,h in mv)
stay=[(a[1],b[0]) for a,b in zip(R,R[1:]) if a[2]==b[2]]
tots=sum(h-l for l,h in stay); idles=sum((h-l)-busy(l,h) for l,h in stay)
print(f"moves {len(mv)}: {tot*1e3:.1f} ms, the write stage idle during them {idle*1e3:.1f} ms ({100*idle/tot if tot else 0:.0f}%); same-worker gaps {tots*1e3:.1f} ms, write idle during them {idles*1e3:.1f} ms ({100*idles/tots:.0f}%)")
