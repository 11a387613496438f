#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on a GPU machine that has no Rust
# toolchain and no network (docs/gpu.md): the release binaries `engine`,
# `search` (torch-fsm's policy) and `paper-repro` (CUDA loaded at run time by
# cudarc) and the test binaries
# that hold the CUDA twin tests (engine-replay's unit tests, planner's
# replay_edbatch), stripped and packed into target/gpu-kit/kit.tar.xz
# (ignored by git; the device tool carries the folder: `carry:
# ["target/gpu-kit"]`). The working tree and the kit travel together, 64
# MiB in all: packed, the kit is a fifth of its 40 MB; this prints both.
#
# usage: scripts/gpu-kit.sh          env: JOBS (cargo -j, default: all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
kit=target/gpu-kit
jobs=(${JOBS:+-j "$JOBS"})
cargo build --release "${jobs[@]}" -p engine --bin engine -p search --bin search -p paper-repro --bin paper-repro
# The test binaries' paths, from cargo's own report of what it built.
tests=$(cargo test --release "${jobs[@]}" --no-run --message-format=json \
  -p engine-replay --lib -p planner --test replay_edbatch |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    name = m.get("target", {}).get("name")
    want = {"engine_replay": "lib", "replay_edbatch": "test"}
    if m.get("reason") == "compiler-artifact" and m.get("executable") and want.get(name) in m["target"]["kind"]:
        print(name + " " + m["executable"])')
stage=target/gpu-kit-stage
rm -rf "$kit" "$stage"
mkdir -p "$kit" "$stage/tests"
for b in engine search paper-repro; do
  strip -o "$stage/$b" "target/release/$b"
done
while read -r name exe; do
  [ -n "$name" ] && strip -o "$stage/tests/$name" "$exe"
done <<<"$tests"
git rev-parse HEAD >"$stage/REVISION"
git status --porcelain --untracked-files=no | grep -q . && echo "dirty" >>"$stage/REVISION"
ls -la "$stage" "$stage/tests"
tar -C "$stage" -cf - . | xz -6 -T0 >"$kit/kit.tar.xz"
rm -rf "$stage"
du -sh "$kit/kit.tar.xz"
python3 - <<'PY'
import os, subprocess
files = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout.decode().split("\0")
tree = sum(os.path.getsize(f) for f in files if f and os.path.isfile(f))
kit = os.path.getsize("target/gpu-kit/kit.tar.xz")
print(f"travels: tree {tree / 2**20:.1f} MiB + kit {kit / 2**20:.1f} MiB = {(tree + kit) / 2**20:.1f} MiB of 64")
PY
