"""The engine effect against the fair peers over the committed fair runs:
per point, batchlab's fastest executor (cavs, edbatch) against the fastest
PyTorch or DGL system (eager, torch-levels, torch-fsm, dgl; the earlier
dgl-pull and torch-depth are left out), per round, median (least-most).
Rows files are read in the order given; a later file's point replaces an
earlier one's (a re-measure).

    python3 combined.py ROWS.json...   # the table and the summary lines
"""

import json
import statistics as S
import sys

BATCHLAB = ("cavs", "edbatch")
FAIR = ("torch", "torch-levels", "torch-fsm", "dgl")


def points(path: str) -> dict:
    out: dict = {}
    for r in json.load(open(path)):
        c = r["config"]
        s = r.get("samples") or []
        reps = c["repeats"]
        per_round = [S.median(s[i : i + reps]) for i in range(0, len(s), reps)]
        key = ("training" if c.get("train") else "inference", c["workload"], c["batch"], c["hidden"])
        out.setdefault(key, {})[c["system"]] = per_round
    return out


merged: dict = {}
for path in sys.argv[1:]:
    merged.update(points(path))

rows = []
for key in sorted(merged):
    m = merged[key]
    peers = [s for s in FAIR if m.get(s)]
    ours = [s for s in BATCHLAB if m.get(s)]
    n = min(len(m[s]) for s in peers + ours)
    eff = [min(m[s][i] for s in peers) / min(m[s][i] for s in ours) for i in range(n)]
    best_peer = min(peers, key=lambda s: S.median(m[s]))
    rows.append((key, S.median(eff), min(eff), max(eff), best_peer))

print("| mode | workload | batch | hidden | engine effect, median (least–most) | fastest fair peer |")
print("|---|---|---|---|---|---|")
for (mode, w, b, h), med, lo, hi, peer in rows:
    print(f"| {mode} | {w} | {b} | {h} | {med:.2f}× ({lo:.2f}–{hi:.2f}) | {peer} |")
for mode in ("inference", "training"):
    mine = [r for r in rows if r[0][0] == mode]
    if not mine:
        continue
    low = [f"{k[1]} b{k[2]} h{k[3]} {m:.2f}×" for k, m, *_ in mine if round(m, 2) < 1.5]
    print(
        f"\n{mode}: {len(mine)} points, {min(r[1] for r in mine):.2f}–{max(r[1] for r in mine):.2f}×; "
        f"below 1.5×: {', '.join(low) or 'none'}"
    )
