#!/usr/bin/env bash
# The one prepared GPU check (docs/gpu.md). It runs on the GPU machine, from
# the repository root, with the binaries scripts/gpu-kit.sh built and packed
# on the CPU machine (the GPU machine has no Rust toolchain and no network).
# Its steps, each under its own time limit, 9.5 minutes at most in all:
#
#   devices          engine devices --check
#   twin-tests       the CUDA twins of the replay's device tests (engine-replay)
#   twin-planner     the CUDA twin of the planner's ED-Batch replay test
#   measure          paper-repro measure --device cuda: vpps, vpps-train (the
#                    embedded specs), fig6, table6, cavs-fig8 (training) from
#                    scripts/gpu-check/specs (short grids)
#   peers            paper-repro measure --device cuda of the peers grid in
#                    scripts/gpu-check/specs: PyTorch (the machine's python3)
#                    eager and batched by bt.run beside cavs, edbatch, vpps
#   report           paper-repro report of those rows
#
# A step that fails or runs out of time is recorded and the next one runs.
# Everything goes into target/DATE-gpu-check/ (rows, REPORT.md, figures,
# logs/, SUMMARY.txt, the machine's description); with $OUT set (the device
# tool sets it) that folder is packed into $OUT/DATE-gpu-check.tar.gz and
# SUMMARY.txt copied beside it. Exit status: 0 when every step passed.
#
# usage: bash scripts/gpu-check.sh        env: KIT (target/gpu-kit/kit.tar.xz)
set -uo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
name="$(date -u +%Y-%m-%d)-gpu-check"
dir="target/$name"
rm -rf "$dir"
mkdir -p "$dir/logs"
summary="$dir/SUMMARY.txt"
bin=$(mktemp -d)
if ! tar -xJf "${KIT:-target/gpu-kit/kit.tar.xz}" -C "$bin"; then
  echo "gpu-check: no kit at ${KIT:-target/gpu-kit/kit.tar.xz}: build it with scripts/gpu-kit.sh and carry target/gpu-kit" >&2
  exit 2
fi
failed=0

# step NAME SECONDS COMMAND...: runs COMMAND under a time limit, its output
# in logs/NAME.log, its exit status and time in SUMMARY.txt.
step() {
  local step=$1 limit=$2
  shift 2
  local t0
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$dir/logs/$step.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || failed=1
  local why=""
  [ "$rc" -eq 124 ] && why=" (ran out of its $limit s)"
  echo "$step: exit $rc$why in $(($(date +%s) - t0)) s" | tee -a "$summary"
}

{
  echo "kit revision: $(tr '\n' ' ' <"$bin/REVISION")"
  echo "tree revision: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  date -u
  uname -a
  echo "cores: $(nproc)"
  free -g
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
} >"$dir/logs/machine.txt" 2>&1

step devices 30 "$bin/engine" devices --check --json
# The twins are #[ignore]d where built without BATCHLAB_CUDA_TESTS=1:
# --include-ignored runs them, the name filter keeps to them.
step twin-tests 150 "$bin/tests/engine_replay" on_cuda --include-ignored --test-threads 1
step twin-planner 45 "$bin/tests/replay_edbatch" on_cuda --include-ignored --test-threads 1
items=vpps,vpps-train,fig6,table6,cavs-fig8
step measure 240 "$bin/paper-repro" measure --device cuda --specs scripts/gpu-check/specs \
  --only "$items" --out "$dir"
# The peers' environment is the machine's own python3 (it has PyTorch; the
# harness and batchlab_torch come from this tree), the one paper-repro
# opens as DIR/venv/bin/python.
penv=$(mktemp -d)
mkdir -p "$penv/venv/bin"
ln -s "$(command -v python3)" "$penv/venv/bin/python"
step peers 75 "$bin/paper-repro" measure --device cuda --specs scripts/gpu-check/specs \
  --only peers --peers-env "$penv" --out "$dir"
step report 30 "$bin/paper-repro" report --rows "$dir/rows" --out "$dir" --only "$items,peers"
echo "total: $(($(date +%s) - started)) s" | tee -a "$summary"

if [ -n "${OUT:-}" ]; then
  tar -C target -czf "$OUT/$name.tar.gz" "$name"
  cp "$summary" "$OUT/SUMMARY.txt"
fi
rm -rf "$bin" "$penv"
exit "$failed"
