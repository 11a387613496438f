"""Per point: each system's median ms (least-most over rounds) and the
engine effect per round: the fastest fair peer's time / batchlab's fastest."""
import json, sys, statistics as S
rows = json.load(open(sys.argv[1]))
pts = {}
for r in rows:
    c = r["config"]
    s = r.get("samples") or []
    reps = c["repeats"]
    pts.setdefault((c["workload"], c["batch"], c["hidden"]), {})[c["system"]] = [S.median(s[i:i + reps]) for i in range(0, len(s), reps)] or None
B, P = ["cavs", "edbatch"], ["torch-levels", "torch-fsm", "dgl"]
cols = P + B
print("| workload b / h | " + " | ".join(cols) + " | best batchlab ÷ best fair peer |")
print("|" + "---|" * (len(cols) + 2))
for k in sorted(pts):
    m = pts[k]
    cell = lambda s: "—" if not m.get(s) else f"{1e3*S.median(m[s]):.2f} ({1e3*min(m[s]):.2f}–{1e3*max(m[s]):.2f})"
    n = min(len(m[s]) for s in cols if m.get(s))
    eff = [min(m[s][i] for s in P if m.get(s)) / min(m[s][i] for s in B if m.get(s)) for i in range(n)]
    bp = min((S.median(m[s]), s) for s in P if m.get(s))[1]
    bb = min((S.median(m[s]), s) for s in B if m.get(s))[1]
    print(f"| {k[0]} {k[1]} / {k[2]} | " + " | ".join(cell(s) for s in cols) + f" | {S.median(eff):.2f}× ({min(eff):.2f}–{max(eff):.2f}; {bb} ÷ {bp}) |")
