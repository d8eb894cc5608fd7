import json,sys,statistics as st
ab={"tidepool-pipeline":"TPS","tidepool-pipeline-pooled":"POOL","crossbeam-threads":"XB","pariter":"PAR","pipeliner":"PL"}
for f in sys.argv[1:]:
    d=json.load(open(f))
    for s in d["scenarios"]:
        names=[r["impl"] for r in s["results"]]; n=len(names)
        for t in range(n):
            res={}
            for rep,v in enumerate(s["results"][t]["repeats"]):
                order=[(k+rep)%(n+1) for k in range(n+1)]; pos=order.index(t)
                if pos>0: pred=order[pos-1]
                elif rep==0: continue
                else: pred=(n+rep-1)%(n+1)
                pn="OR" if pred==n else ab[names[pred]]
                res.setdefault(pn,[]).append(v/s["bound_items_per_sec"]*100)
            print(f.split("/")[-1], s["name"][:20], ab[names[t]], " ".join("after %s n=%d %.1f"%(k,len(v),st.median(v)) for k,v in sorted(res.items())))
        print(f.split("/")[-1], "oracle", round(100*st.median(s["oracle_repeats"])/s["bound_items_per_sec"],1))
