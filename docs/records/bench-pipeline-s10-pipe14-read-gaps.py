#!/usr/bin/env python3
"""Session 10b (branch pipe14): the read stage's gap on compute-plus-blocking-io, decomposed into
the syscalls the reader makes in it, from the kernel's raw_syscalls tracepoints:
  perf record -q -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -o X.data /tmp/pipe14-<arm> pipeline \
      --shape compute-plus-blocking-io --items 3000 --repeats 1 --impl tidepool-pipeline-pooled -q
  perf script -i X.data > X.txt
  python3 bench-pipeline-s10-pipe14-read-gaps.py X.txt W0SITE SITE
A read is a clock_nanosleep entered at a read site: the low 12 bits of its rqtp argument, SITE in the
spawned workers, W0SITE in worker 0 (the calling thread; 'xxx' if it made no read). The sites differ per
binary; they were found from the stack of each call (perf record -e syscalls:sys_enter_clock_nanosleep
--call-graph dwarf: the read is the one under Source::fill). With W0SITE 'read', the reads are every
clock_nanosleep of the thread named 'read' (thread-per-stage mode). Gap = one read's return to the next
read's call, any thread ('moved' when the thread changes); a same-thread gap is decomposed into the
syscalls the reader made in it (futex by op and the futex word's low bits: the condition variable's and
the mutex's words differ), with each syscall's own duration.
"""
import sys,re,statistics as st,collections
rx=re.compile(r"^\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+raw_syscalls:sys_(enter|exit):\s+NR (\d+) (.*)$")
N={202:'futex',98:'getrusage',144:'sched_setscheduler',314:'sched_setattr',24:'sched_yield',230:'nanosleep'}
w0site=sys.argv[2]; main=None; comm_of={}; RS=sys.argv[3] if len(sys.argv)>3 else '618'
ev=[]
for line in open(sys.argv[1]):
    m=rx.match(line)
    if not m: continue
    comm,tid,t,kind,nr,rest=m.groups()
    if main is None: main=tid
    comm_of[tid]=comm
    ev.append((float(t)*1e6,tid,kind,int(nr),rest))
ev.sort(key=lambda e:e[0])
def isread(tid,rest):
    if w0site=='read': return comm_of.get(tid)=='read'
    s=rest.strip('()').split(', ')[2][-3:]
    return s==(RS if tid!=main else w0site)
open_sys={}  # tid -> (nr, t, isread)
last=None    # (t_exit, tid)
cur_between=collections.defaultdict(list)
gaps=[]
for t,tid,kind,nr,rest in ev:
    if kind=='enter':
        r= nr==230 and isread(tid,rest)
        open_sys[tid]=(('futex-'+{'81':'wake','89':'wait'}.get(rest.strip('()').split(', ')[1],'?')+'@'+rest.strip('()').split(', ')[0][-3:]) if nr==202 else nr,t,r)
        if r:
            if last: gaps.append((t-last[0], last[1]==tid, tuple(cur_between[tid]) if last[1]==tid else None))
            cur_between.clear()
    else:
        if tid not in open_sys: continue
        nr0,t0,r=open_sys.pop(tid)
        if r: last=(t,tid); cur_between.clear()
        elif last: cur_between[tid].append((N.get(nr0,nr0) if isinstance(nr0,int) else nr0, round(t-t0,1)))
same=[g for g in gaps if g[1]]; moved=[g for g in gaps if not g[1]]
def desc(v): v=sorted(v); return f"n {len(v)} median {st.median(v):.1f} mean {st.mean(v):.1f} p90 {v[int(.9*len(v))]:.1f} p99 {v[int(.99*len(v))]:.1f} sum {sum(v)/1e3:.1f} ms"
print("all gaps:   ",desc([g[0] for g in gaps]))
print("same thread:",desc([g[0] for g in same]))
if moved: print("moved:      ",desc([g[0] for g in moved]))
pats=collections.defaultdict(list); sysd=collections.defaultdict(list)
for g,_,b in same:
    pats[tuple(x[0] for x in b)].append(g)
    for name,d in b: sysd[name].append(d)
for p,v in sorted(pats.items(),key=lambda kv:-len(kv[1]))[:8]:
    print(f"  {len(v):5d} ({100*len(v)/len(same):4.1f}%) gap median {st.median(v):5.1f} mean {st.mean(v):6.1f}  syscalls {list(p)}")
for name,v in sysd.items(): print(f"  syscall {name}: {desc(v)}")
