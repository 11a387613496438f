import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
out = []
for sys_ in ("bt-fsm", "bt-depth", "eager", "levels"):
    for train in (0, 1):
        per = {}
        for r in rows:
            if r["system"] == sys_ and r["train"] == train:
                per.setdefault(r["round"], {})[r["version"]] = r["total_s"]
        ratios = [v["new"] / v["old"] for v in per.values() if "new" in v and "old" in v]
        old = statistics.median(v["old"] for v in per.values() if "old" in v)
        new = statistics.median(v["new"] for v in per.values() if "new" in v)
        if ratios:
            print(f"{sys_:9s} {'training ' if train else 'inference'}: old {old*1e3:7.2f} ms  new {new*1e3:7.2f} ms  new/old {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) rounds {len(ratios)}")
