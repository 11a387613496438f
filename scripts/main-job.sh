#!/usr/bin/env bash
# The README's main job: regenerate the papers' figures and tables from
# scratch in quick mode on the embedded real data (`paper-repro --quick`),
# then check that every expected file exists and parses (not its timings).
# CI runs this (.ci/run).
#
# Usage: scripts/main-job.sh [OUT_DIR]   (default out/paper-repro-quick)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/paper-repro-quick}

# Every binary: the PyTorch-batched peers ask `engine` (schedules) and
# `search` (the FSM) built beside paper-repro.
cargo build --release -q
target/release/paper-repro --quick --out "$out"

# Items drawn on every machine; `vpps` and `vpps-train` need `--device cuda`, `peers` the
# peers' environment (`paper-repro peers --install`), so they are checked for
# their REPORT.md section, and `peers` / `peers-train` for their files where
# they ran.
items=(fig7 fig7-gap table2 table4 table5 fig6 fig9 table6 cavs-fig8 cavs-fig10
       policies policies-exact policies-hard policies-unseen optimise-scaling)
all_items=("${items[@]}" vpps vpps-train peers peers-train)
extra_csv=(fig6-ratios cavs-fig8-paper cavs-fig8-backward policies-transfer policies-hard-curves)
fail=0
bad() { echo "main-job: $*" >&2; fail=1; }

check_png() {
  [ -s "$1" ] || { bad "missing $1"; return; }
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || bad "$1 is not a PNG"
}
check_svg() {
  [ -s "$1" ] || { bad "missing $1"; return; }
  case "$(head -c 5 "$1")" in
    "<svg "|"<svg>"|"<?xml") ;;
    *) bad "$1 does not start with <svg or <?xml" ;;
  esac
  tail -c 200 "$1" | grep -q "</svg>" || bad "$1 is cut short"
}
check_csv() {
  [ -s "$1" ] || { bad "missing $1"; return; }
  [ "$(wc -l < "$1")" -ge 2 ] || bad "$1 has no rows"
  head -n 1 "$1" | grep -q "," || bad "$1 has no header"
}

for i in "${items[@]}"; do
  check_png "$out/$i.png"
  check_svg "$out/$i.svg"
  check_csv "$out/$i.csv"
  check_csv "$out/rows/$i.csv"
done
for c in "${extra_csv[@]}"; do check_csv "$out/$c.csv"; done
if [ -e "$out/peers.png" ]; then
  check_png "$out/peers.png"
  check_svg "$out/peers.svg"
  for c in peers peers-split peers-checks rows/peers; do check_csv "$out/$c.csv"; done
fi
if [ -e "$out/peers-train.png" ]; then
  check_png "$out/peers-train.png"
  check_svg "$out/peers-train.svg"
  for c in peers-train peers-train-split peers-train-checks rows/peers-train; do
    check_csv "$out/$c.csv"
  done
fi
report="$out/REPORT.md"
if [ -s "$report" ]; then
  for i in "${all_items[@]}"; do
    grep -q "^Item \`$i\`" "$report" || bad "REPORT.md has no section for $i"
  done
  [ "$(grep -c '^\*\*Reading\.\*\*' "$report")" -ge "${#items[@]}" ] || bad "REPORT.md lacks readings"
else
  bad "missing $report"
fi
[ -s "$out/summary.json" ] || bad "missing $out/summary.json"

if [ "$fail" -ne 0 ]; then
  echo "main-job: FAILED (outputs in $out)" >&2
  exit 1
fi
echo "main-job: ${#items[@]} figures (PNG + SVG), their CSVs and REPORT.md checked in $out"
