"""Per point: each system's median ms (least-most over rounds), and per-round
ratios (interleaved): dgl-pull/dgl, torch-depth/torch-levels, and the engine
effect best batchlab / best PyTorch-or-DGL."""
import json, sys, statistics as S
rows = json.load(open(sys.argv[1]))
pts = {}
for r in rows:
    c = r["config"]
    if r.get("error") or not r.get("samples"):
        pts.setdefault((c["batch"], c["hidden"]), {})[c["system"]] = None
        continue
    reps = c["repeats"]
    s = r["samples"]
    per_round = [S.median(s[i:i + reps]) for i in range(0, len(s), reps)]
    pts.setdefault((c["batch"], c["hidden"]), {})[c["system"]] = per_round
BATCHLAB = ["cavs", "edbatch", "dynet"]
PEERS = ["torch", "torch-levels", "torch-depth", "torch-fsm", "dgl", "dgl-pull"]
def rr(a, b):
    v = [x / y for x, y in zip(a, b)]
    return f"{S.median(v):.2f}× ({min(v):.2f}–{max(v):.2f})"
print("| batch / hidden | " + " | ".join(["dgl-pull", "dgl", "torch-depth", "torch-levels", "torch", "cavs", "edbatch"]) + " | dgl-pull ÷ dgl | torch-depth ÷ torch-levels | best batchlab ÷ best peer |")
print("|" + "---|" * 11)
for (b, h) in sorted(pts):
    m = pts[(b, h)]
    def ms(sys_):
        v = m.get(sys_)
        return "—" if not v else f"{1e3*S.median(v):.2f} ({1e3*min(v):.2f}–{1e3*max(v):.2f})"
    cells = [ms(s) for s in ["dgl-pull", "dgl", "torch-depth", "torch-levels", "torch", "cavs", "edbatch"]]
    a = rr(m["dgl-pull"], m["dgl"]) if m.get("dgl-pull") and m.get("dgl") else "—"
    t = rr(m["torch-depth"], m["torch-levels"]) if m.get("torch-depth") and m.get("torch-levels") else "—"
    # engine effect per round: best peer time / best batchlab time
    rounds = len(next(v for v in m.values() if v))
    eff = []
    for i in range(rounds):
        bl = min(m[s][i] for s in BATCHLAB if m.get(s))
        pe = min(m[s][i] for s in PEERS if m.get(s))
        eff.append(pe / bl)
    bestp = min((S.median(m[s]), s) for s in PEERS if m.get(s))[1]
    bestb = min((S.median(m[s]), s) for s in BATCHLAB if m.get(s))[1]
    print(f"| {b} / {h} | " + " | ".join(cells) + f" | {a} | {t} | {S.median(eff):.2f}× ({min(eff):.2f}–{max(eff):.2f}; {bestb} ÷ {bestp}) |")
