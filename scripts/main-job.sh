#!/usr/bin/env bash
# The README's main job on the embedded default data: record a TreeLSTM
# mini-batch of 32 real SST trees and summarise it (nodes, types, lower bound).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
cargo run --release -q -p engine -- record --workload tree-lstm --batch 32 --hidden 64 --out "$out/tree-lstm-b32.json"
cargo run --release -q -p engine -- inspect "$out/tree-lstm-b32.json"
