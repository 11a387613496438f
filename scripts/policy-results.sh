#!/usr/bin/env bash
# Regenerates tables (a) and (b) of docs/results/policies.md from scratch with
# the release binaries:
#  (a) every workload at batch 32, hidden 64, cell level (engine's default
#      record seed 7): batches of the five heuristics and of an FSM per encoding
#      (search train --reference: ED-Batch's scheme, seed 1), against the lower bound;
#  (b) generalisation: the best FSM of (a) (fewest batches, ties by encoding
#      order) on batch-128 traces recorded with seeds 101 and 102;
#  (c) small graphs: every batch-1 trace of ≤ 64 nodes among seeds 1..30 of
#      each workload (default and synthetic data), plus lattice-lstm and
#      tree-lstm-2type batch 2-4 traces of ≤ 256 nodes among seeds 1..30: the
#      exact optimum (search optimal) against the heuristics and the best of
#      the five FSMs.
# Usage: scripts/policy-results.sh [OUT_DIR]   (default out/policy-results)
# Writes OUT_DIR/tables.md (and the traces, policies and JSON beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v jq >/dev/null || { echo "this script needs jq (apt-get install jq)" >&2; exit 1; }
out=${1:-out/policy-results}
cargo build --release -q -p engine -p search
E=target/release/engine
S=target/release/search
mkdir -p "$out"
encodings="base max sort sort-cond sort-phase"
md="$out/tables.md"
{
  echo "### (a) batch 32, hidden 64: batches per policy (ratio to the lower bound)"
  echo
  echo "| workload | nodes | LB | depth | agenda | agenda-upd | cavs | typewise | FSM-base | FSM-max | FSM-sort | FSM-sort-cond | FSM-sort-phase | best FSM | states | misses |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} > "$md"
b_rows=()
for w in $("$E" workloads --json | jq -r '.[].name'); do
  d="$out/$w"
  mkdir -p "$d"
  "$E" record --workload "$w" --batch 32 --hidden 64 --out "$d/b32.json" --json > "$d/record.json"
  pols=()
  for e in $encodings; do
    "$S" train --trace "$d/b32.json" --encoding "$e" --reference --seed 1 --out "$d/fsm-$e.yaml" --json > "$d/train-$e.json"
    pols+=(--policy "$d/fsm-$e.yaml")
  done
  "$S" compare --trace "$d/b32.json" "${pols[@]}" --json > "$d/compare.json"
  # Best FSM: fewest batches, ties to the earlier encoding (rows come in encoding order).
  best_enc=$(jq -r '.rows[5:] | min_by(.batches) | .name | capture("^fsm\\((?<e>[^)]+)\\)").e' "$d/compare.json")
  states=$(jq -r '.states' "$d/train-$best_enc.json")
  jq -r --arg enc "$best_enc" --arg states "$states" '
    def cell: "\(.batches) (\(.ratio * 100 | round / 100))";
    . as $c
    | ($c.rows[5:] | min_by(.batches)) as $b
    | "| \($c.workload) | \($c.nodes) | \($c.lower_bound) | "
      + ([$c.rows[] | cell] | join(" | "))
      + " | \($enc) \($b.batches) (\($b.ratio * 1000 | round / 1000)) | \($states) | \($b.misses) |"
  ' "$d/compare.json" >> "$md"
  for s in 101 102; do
    "$E" record --workload "$w" --batch 128 --hidden 64 --seed "$s" --out "$d/b128-s$s.json" --json > /dev/null
    "$S" compare --trace "$d/b128-s$s.json" --policy "$d/fsm-$best_enc.yaml" --json > "$d/gen-s$s.json"
    b_rows+=("$(jq -r --arg enc "$best_enc" --arg s "$s" '
      . as $c
      | ($c.rows | map({(.name): .}) | add) as $r
      | $c.rows[5] as $f
      | "| \($c.workload) | \($enc) | \($s) | \($c.nodes) | \($c.lower_bound) | \($f.batches) | \($f.ratio * 1000 | round / 1000) | \($f.miss_rate * 1000 | round / 10)% | \($r["typewise"].batches) | \($r["agenda"].batches) |"
    ' "$d/gen-s$s.json")")
  done
done
{
  echo
  echo "### (b) generalisation: best batch-32 FSM on batch-128 traces"
  echo
  echo "| workload | encoding | seed | nodes | LB | FSM batches | FSM / LB | miss rate | typewise | agenda |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${b_rows[@]}"
} >> "$md"

# (c): one JSON line per small graph, then aggregated per workload.
small="$out/small"
mkdir -p "$small"
: > "$small/rows.jsonl"
small_case() { # workload data batch seed max_nodes
  local f="$small/$1-$2-b$3-s$4.json"
  local n
  n=$("$E" record --workload "$1" --data "$2" --batch "$3" --hidden 64 --seed "$4" --out "$f" --json | jq .nodes)
  if [ "$n" -gt "$5" ]; then rm -f "$f"; return; fi
  "$S" optimal --trace "$f" --max-nodes "$5" --json > "$f.opt"
  "$S" compare --trace "$f" --repeat 1 --json > "$f.cmp"
  "$S" train --trace "$f" --encoding all --reference --seed 1 --out "$f.yaml" --json > "$f.train"
  jq -c -n --arg batch "$3" --slurpfile o "$f.opt" --slurpfile c "$f.cmp" --slurpfile t "$f.train" '
    ($c[0].rows | map({(.name): .batches}) | add) as $h
    | {workload: $o[0].workload, batches: (if $batch == "1" then "1" else "2-4" end), nodes: $o[0].nodes, lb: $o[0].lower_bound,
       opt: $o[0].batches, proved: $o[0].proved, expanded: $o[0].expanded,
       typewise: $h.typewise, agenda: $h.agenda, depth: $h.depth,
       fsm: ($t[0].runs | map(.best_batches) | min)}' >> "$small/rows.jsonl"
}
for w in $("$E" workloads --json | jq -r '.[].name'); do
  for data in default synthetic; do
    for s in $(seq 1 30); do small_case "$w" "$data" 1 "$s" 64; done
  done
done
for w in lattice-lstm tree-lstm-2type; do
  for b in 2 3 4; do
    for s in $(seq 1 30); do small_case "$w" default "$b" "$s" 256; done
  done
done
{
  echo
  echo "### (c) small graphs: exact optimum against the heuristics and the best FSM"
  echo
  echo "| workload | batch | graphs | nodes | proved | opt = LB | max opt / LB | typewise = opt | agenda = opt | depth = opt | best FSM = opt | best FSM − opt (max) | max expansions |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  jq -r -s '
    def r2: . * 100 | round / 100;
    . as $all | (map([.workload, .batches]) | unique)[] as [$w, $b]
    | ($all | map(select(.workload == $w and .batches == $b))) as $r
    | def n(f): $r | map(select(f)) | length;
      "| \($w) | \($b) | \($r | length) | \($r | map(.nodes) | min)–\($r | map(.nodes) | max) | \(n(.proved)) | \(n(.opt == .lb)) | \($r | map(.opt / .lb) | max | r2) | \(n(.typewise == .opt)) | \(n(.agenda == .opt)) | \(n(.depth == .opt)) | \(n(.fsm == .opt)) | \($r | map(.fsm - .opt) | max) | \($r | map(.expanded) | max) |"
  ' "$small/rows.jsonl"
} >> "$md"
cat "$md"
