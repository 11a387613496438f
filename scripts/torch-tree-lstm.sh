#!/usr/bin/env bash
# The measurement behind docs/torch.md "Measured": example (a), the Tree-LSTM
# written as plain PyTorch (batchlab_torch.examples.tree_lstm), recorded on
# the SST trees of `engine record --workload tree-lstm --seed 7`, and
# `paper-repro model` on it: the user's eager loop, bt.run by depth, agenda
# and the learned FSM, the hand-written level-by-level program, batchlab's
# executors, and the same executors on the built-in trace (--builtin), one
# thread, interleaved, inference and training.
#
# usage: scripts/torch-tree-lstm.sh OUT [HIDDEN...]     (default hidden: 64 256)
# env:   BATCH (64), ROUNDS (7), REPEATS (3), WORK (target/torch-tree-lstm:
#        the recorded traces and model folders, not kept with the results)
# Needs the project's Python environment: paper-repro peers --install --peers torch
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/torch-tree-lstm.sh OUT [HIDDEN...]}
shift
hiddens=${*:-64 256}
batch=${BATCH:-64}
rounds=${ROUNDS:-7}
repeats=${REPEATS:-3}
work=${WORK:-target/torch-tree-lstm}
py="${BATCHLAB_PEERS_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/batchlab/peers}/venv/bin/python"
if [ ! -x "$py" ]; then
  echo "no project Python environment at $py: run paper-repro peers --install --peers torch" >&2
  exit 1
fi
cargo build --release -q -p engine -p paper-repro
for h in $hiddens; do
  w="$work/b$batch-h$h"
  mkdir -p "$w"
  target/release/engine record --workload tree-lstm --batch "$batch" --hidden "$h" --seed 7 \
    --out "$w/builtin.json"
  # The user's own recording: mark the cells, run the loop, save. The
  # example's 1000-word table and its min(id, 999) are the built-in lookup's.
  PYTHONPATH="$PWD/engine/torch${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 "$py" - "$w/builtin.json" "$h" "$w/model" <<'PY'
import sys

import torch

import batchlab_torch as bt
from batchlab_torch.examples.data import sst_trees
from batchlab_torch.examples.tree_lstm import TreeLSTM

torch.set_num_threads(1)
torch.manual_seed(7)
trace, hidden, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
trees = sst_trees(trace)
model = TreeLSTM(hidden=hidden)
rec = bt.Recorder(model, cells={"leaf": model.leaf, "node": model.node, "out": model.out})
with rec:
    total = sum(model(t) for t in trees)  # the mini-batch's loss, as when training
rec.save(out)
PY
  target/release/paper-repro model --model "$w/model" --builtin "$w/builtin.json" \
    --torch batchlab_torch.examples.tree_lstm:setup \
    --rounds "$rounds" --repeats "$repeats" --out "$out/h$h"
done
