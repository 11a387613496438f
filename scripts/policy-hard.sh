#!/usr/bin/env bash
# Regenerates the "hard graphs" tables of docs/results/policies.md (issue 16)
# from scratch with the release binaries:
#  (d) acceptance: lattice-lstm and lattice-gru at batch 32 and 64 (Weibo),
#      tree-lstm-2type at batch 32, a seeded random 5-type DAG of 3000 nodes:
#      certified bound and best-known schedule (search optimise, 30 s), the
#      reference trainer (ED-Batch's scheme, --reference), the default trainer
#      without and with the best-known schedule as teacher, every encoding,
#      the best kept; and the learning curves;
#  (e) generalisation: the teacher-trained FSM of each batch-32 seed-1 trace
#      on unseen traces (other seeds, batch 32, 64 and 128; the DAG: other
#      seeds and sizes): batches, miss rate, FSM / best-known (optimise 10 s);
#  (f) optimiser scaling: search optimise --budget 30s on graphs of 1k-65k
#      nodes: wall and CPU time, widths finished, best-known vs typewise.
# Usage: scripts/policy-hard.sh [OUT_DIR]   (default out/policy-hard)
# Writes OUT_DIR/tables.md (and every trace, schedule, policy and JSON beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v jq >/dev/null || { echo "this script needs jq (apt-get install jq)" >&2; exit 1; }
out=${1:-out/policy-hard}
cargo build --release -q -p engine -p search
E=target/release/engine
S=target/release/search
mkdir -p "$out"
md="$out/tables.md"
: > "$md"

# A trace: a workload at a batch and record seed, or the random DAG.
trace() { # name batch seed -> path
  local w=$1 b=$2 s=$3 p="$out/traces/$1-b$2-s$3.json"
  mkdir -p "$out/traces"
  if [ ! -f "$p" ]; then
    if [ "$w" = random-dag ]; then
      "$S" random-dag --nodes "$b" --seed "$s" --out "$p" --json > /dev/null
    else
      "$E" record --workload "$w" --batch "$b" --hidden 64 --seed "$s" --out "$p" --json > /dev/null
    fi
  fi
  echo "$p"
}

# ---- (d) acceptance -------------------------------------------------------
{
  echo "### (d) Hard graphs: certified bound, best-known, typewise and the FSMs"
  echo
  echo "Best-known and certified bound: \`search optimise --budget 30s\`. FSMs: \`search train --encoding all\` (the best encoding kept), with ED-Batch's scheme (\`--reference\`), the default scheme, and the default scheme with the best-known schedule as \`--teacher\`; 1000 episodes at most."
  echo
  echo "| graph | nodes | A.3 | certified bound | best-known | gap | typewise | reference FSM (best@ep) | default FSM (best@ep) | teacher FSM (encoding) | teacher FSM / best-known | FSM ≤ typewise |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} >> "$md"
curves=()
for spec in lattice-lstm:32:7 lattice-lstm:64:7 lattice-gru:32:7 lattice-gru:64:7 tree-lstm-2type:32:7 random-dag:3000:1; do
  IFS=: read -r w b s <<< "$spec"
  t=$(trace "$w" "$b" "$s")
  d="$out/accept/$w-b$b"
  mkdir -p "$d"
  "$S" optimise --trace "$t" --budget 30s --out "$d/best.json" --json > "$d/optimise.json"
  "$S" train --trace "$t" --encoding all --reference --out "$d/reference.yaml" --json > "$d/reference.json"
  "$S" train --trace "$t" --encoding all --out "$d/default.yaml" --json > "$d/default.json"
  "$S" train --trace "$t" --encoding all --teacher "$d/best.json" --out "$d/teacher.yaml" --json > "$d/teacher.json"
  jq -r -s --arg g "$w b$b" '
    .[0] as $o | .[1] as $r | .[2] as $d | .[3] as $t
    | def r2: . * 1000 | round / 1000;
      "| \($g) | \($o.nodes) | \($o.lower_bound) | \($o.certified_bound) (\($o.bound.method)) | \($o.best_known) | \($o.gap | r2) | \($o.heuristic_batches) | \($r.best_batches) (\($r.best_episode)) | \($d.best_batches) (\($d.best_episode)) | \($t.best_batches) (\($t.encoding)) | \($t.best_batches / $o.best_known | r2) | \(if $t.best_batches <= $t.prior_batches then "yes" else "no" end) |"
  ' "$d/optimise.json" "$d/reference.json" "$d/default.json" "$d/teacher.json" >> "$md"
  curves+=("$(jq -r --arg g "$w b$b" '
      "| \($g) | \(.encoding) | \(.prior_batches) | \(.curve | map("\(.episode):\(.best)") | .[0:12] | join(" ")) |"
    ' "$d/default.json")")
done
{
  echo
  echo "Learning curves of the default trainer without teacher (the kept encoding; \`episode:best batches\`, every 50 episodes; episode 0 is the prior, typewise):"
  echo
  echo "| graph | encoding | prior | curve |"
  echo "|---|---|---|---|"
  printf '%s\n' "${curves[@]}"
  echo
} >> "$md"

# ---- (e) generalisation ---------------------------------------------------
{
  echo "### (e) Generalisation: train on one trace, run on unseen ones"
  echo
  echo "FSM: \`search train --encoding all --teacher optimise --teacher-budget 30s\` on the batch-32 trace of record seed 1 (the DAG: 3000 nodes, seed 1). Unseen traces: other record seeds and batch sizes. Best-known: \`search optimise --budget 10s\`."
  echo
  echo "| workload | trained on | run on | nodes | FSM | misses (rate) | typewise | best-known | FSM / best-known | typewise / best-known |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} >> "$md"
for w in lattice-lstm lattice-gru tree-lstm-2type random-dag; do
  d="$out/gen/$w"
  mkdir -p "$d"
  if [ "$w" = random-dag ]; then
    train_t=$(trace "$w" 3000 1); train_tag="3000 nodes s1"
    unseen="3000:2 3000:3 6000:2 20000:2"
  else
    train_t=$(trace "$w" 32 1); train_tag="b32 s1"
    unseen="32:7 32:101 64:101 128:101 128:102"
  fi
  "$S" train --trace "$train_t" --encoding all --teacher optimise --teacher-budget 30s --out "$d/fsm.yaml" --json > "$d/train.json"
  jq -r --arg w "$w" --arg tag "$train_tag" '
      "| \($w) | \($tag) (\(.encoding), \(.states) states) | same | \(.nodes) | \(.best_batches) | — | \(.best_heuristic_batches) | \(.teacher.batches) | \(.best_batches / .teacher.batches * 1000 | round / 1000) | \(.best_heuristic_batches / .teacher.batches * 1000 | round / 1000) |"
    ' "$d/train.json" >> "$md"
  for u in $unseen; do
    IFS=: read -r b s <<< "$u"
    t=$(trace "$w" "$b" "$s")
    "$S" eval --trace "$t" --policy "$d/fsm.yaml" --repeat 1 --json > "$d/eval-$b-$s.json"
    "$S" eval --trace "$t" --policy typewise --repeat 1 --json > "$d/tw-$b-$s.json"
    "$S" optimise --trace "$t" --budget 10s --json > "$d/opt-$b-$s.json"
    jq -r -s --arg w "$w" --arg tag "$train_tag" --arg run "$( [ "$w" = random-dag ] && echo "$b nodes s$s" || echo "b$b s$s")" '
      .[0] as $e | .[1] as $tw | .[2] as $o
      | def r3: . * 1000 | round / 1000;
        "| \($w) | \($tag) | \($run) | \($e.nodes) | \($e.batches) | \($e.misses) (\($e.miss_rate * 1000 | round / 10)%) | \($tw.batches) | \($o.best_known) | \($e.batches / $o.best_known | r3) | \($tw.batches / $o.best_known | r3) |"
    ' "$d/eval-$b-$s.json" "$d/tw-$b-$s.json" "$d/opt-$b-$s.json" >> "$md"
  done
done
echo >> "$md"

# ---- (f) optimiser scaling ------------------------------------------------
{
  echo "### (f) search optimise --budget 30s: scaling"
  echo
  echo "Wall and process CPU seconds (\`/usr/bin/time\`, 2 cores), the widest beam pass finished, and the result."
  echo
  echo "| graph | nodes | wall s | CPU s | widest pass | stop | typewise | best-known | certified bound | gap |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} >> "$md"
for spec in random-dag:1000:1 random-dag:3000:1 random-dag:10000:1 random-dag:20000:1 random-dag:50000:1 lattice-lstm:128:7 tree-lstm-2type:128:7 bilstm-tagger-char:128:7 tree-fc:128:7; do
  IFS=: read -r w b s <<< "$spec"
  t=$(trace "$w" "$b" "$s")
  d="$out/scale"
  mkdir -p "$d"
  /usr/bin/time -f "%e %U %S" -o "$d/$w-$b.time" "$S" optimise --trace "$t" --budget 30s --json > "$d/$w-$b.json"
  read -r wall user sys < "$d/$w-$b.time"
  jq -r --arg g "$w $( [ "$w" = random-dag ] && echo "" || echo "b$b")" --arg wall "$wall" --arg cpu "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" '
      "| \($g) | \(.nodes) | \($wall) | \($cpu) | \([.passes[] | select(.finished) | .width] | max // 0) | \(.stop) | \(.heuristic_batches) | \(.best_known) | \(.certified_bound) | \(.gap * 1000 | round / 1000) |"
    ' "$d/$w-$b.json" >> "$md"
done
echo "wrote $md"
