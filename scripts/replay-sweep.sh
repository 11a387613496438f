#!/usr/bin/env bash
# Throughput sweep of the CPU replay engine (ED-Batch Fig. 6 style): for each
# workload and hidden size, every executor at every batch size; the best batch
# size per executor is kept, and edbatch's ratios over cavs, dynet and reference
# are taken from that one run. Policies: an FSM per workload trained on a
# batch-32 trace (`search train --encoding all`); layouts: `planner layout --all`.
#
# Usage: scripts/replay-sweep.sh [OUT_DIR]   (default out/replay-sweep)
# Environment: WORKLOADS, HIDDENS, BATCHES (space-separated) narrow the sweep;
# REPEAT (default 3) timed repetitions per run (the reference runs once);
# DEVICE (default cpu, or cuda);
# BIN: a folder with prebuilt engine/search/planner binaries (no cargo build,
# for machines without a toolchain); STAGE: `all` (default), `prepare` (traces,
# policies, layouts only) or `run` (replays only, on a prepared OUT_DIR).
# Writes OUT_DIR/rows-DEVICE.jsonl (one `engine replay --json` object per run, plus the
# workload, batch and hidden) and OUT_DIR/table-DEVICE.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v jq >/dev/null || { echo "this script needs jq (apt-get install jq)" >&2; exit 1; }
out=${1:-out/replay-sweep}
workloads=${WORKLOADS:-"tree-lstm tree-gru mv-rnn lattice-lstm bilstm-tagger lstm-nmt"}
hiddens=${HIDDENS:-"64 256"}
batches=${BATCHES:-"8 32 128"}
repeat=${REPEAT:-3}
device=${DEVICE:-cpu}
stage=${STAGE:-all}
if [ -n "${BIN:-}" ]; then
  bin=$BIN
else
  cargo build --release -q -p engine -p search -p planner
  bin=target/release
fi
E=$bin/engine
S=$bin/search
P=$bin/planner
mkdir -p "$out"
if [ "$stage" != run ]; then
  for h in $hiddens; do
    "$P" layout --all --hidden "$h" --batch 8 --out-dir "$out/layouts-h$h" > /dev/null
  done
  for w in $workloads; do
    "$E" record --workload "$w" --batch 32 --hidden 64 --out "$out/$w-train.json" > /dev/null
    "$S" train --trace "$out/$w-train.json" --encoding all --seed 1 --out "$out/$w.yaml" --json > "$out/$w-train-report.json"
    for h in $hiddens; do
      for b in $batches; do
        "$E" record --workload "$w" --batch "$b" --hidden "$h" --seed 101 --out "$out/$w-h$h-b$b.json" > /dev/null
      done
    done
  done
fi
[ "$stage" = prepare ] && exit 0
executors="reference dynet cavs edbatch edbatch-nolayout"
rows="$out/rows-$device.jsonl"
: > "$rows"
for w in $workloads; do
  for h in $hiddens; do
    for b in $batches; do
      t="$out/$w-h$h-b$b.json"
      for ex in $executors; do
        r=$repeat
        extra=()
        case $ex in
          reference) r=1 ;;
          edbatch*) extra=(--policy "$out/$w.yaml" --layouts "$out/layouts-h$h") ;;
        esac
        "$E" replay --trace "$t" --executor "$ex" "${extra[@]}" --device "$device" --repeat "$r" --no-check --json \
          | jq -c --arg w "$w" --argjson b "$b" --argjson h "$h" '. + {workload: $w, batch: $b, hidden: $h}' >> "$rows"
      done
    done
  done
done
python3 - "$rows" > "$out/table-$device.md" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
best = collections.defaultdict(dict)
for r in rows:
    key = (r["workload"], r["hidden"])
    cur = best[key].get(r["executor"])
    if cur is None or r["instances_per_s"] > cur["instances_per_s"]:
        best[key][r["executor"]] = r
print("| workload | hidden | reference | dynet | cavs | edbatch-nolayout | edbatch | edbatch/cavs | edbatch/dynet | edbatch/reference | edbatch/nolayout |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
fmt = lambda r: f"{r['instances_per_s']:.0f} (b{r['batch']})" if r else "-"
for (w, h), ex in sorted(best.items()):
    e = ex["edbatch"]["instances_per_s"]
    ratio = lambda x: f"{e / ex[x]['instances_per_s']:.2f}" if x in ex else "-"
    print(f"| {w} | {h} | {fmt(ex.get('reference'))} | {fmt(ex.get('dynet'))} | {fmt(ex.get('cavs'))} | "
          f"{fmt(ex.get('edbatch-nolayout'))} | {fmt(ex['edbatch'])} | {ratio('cavs')} | {ratio('dynet')} | "
          f"{ratio('reference')} | {ratio('edbatch-nolayout')} |")
print()
print("instances/s at the best batch size (bN); ratios of edbatch's best over each executor's best.")
PY
cat "$out/table-$device.md"
