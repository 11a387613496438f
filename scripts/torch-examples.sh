#!/usr/bin/env bash
# The measurement behind docs/torch.md "Measured": each example of
# batchlab_torch.examples recorded on 64 samples at each hidden size with the
# user's own loop, then `paper-repro model --torch` on the folder: the user's
# eager loop, bt.run by depth, agenda and the learned FSM with each sample's
# graph kept and without (new sample objects every mini-batch), bt.run's
# discovery beside its floor, the setup's hand-written baselines (example
# (a)'s level program, example (e)'s PyTorch Geometric version) and
# batchlab's executors on the folder; one thread, each system in its own
# process, interleaved rounds, inference and training.
#
#   a  Tree-LSTM on the SST trees of `engine record --workload tree-lstm --seed 7`
#      (with --builtin: the same trees recorded by the built-in workload)
#   b  Child-Sum Tree-LSTM on the same trees, flattened to any arity
#   c  DAG-RNN on 30-node DAGs cut from `search random-dag --nodes 1920 --seed 3`
#   d  BiLSTM tagger on the WikiNER sentences of `engine record --workload bilstm-tagger --seed 7`
#   e  gated graph network on 64 molecule-like graphs (seed 1)
#
# usage: scripts/torch-examples.sh OUT [EXAMPLES] [HIDDEN...]   (default: abcde, 64 256)
# env:   ROUNDS (5), REPEATS (3), WORK (target/torch-examples: recordings, not kept)
# Needs the project's Python environment: paper-repro peers --install --peers torch
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/torch-examples.sh OUT [EXAMPLES] [HIDDEN...]}
examples=${2:-abcde}
shift $(($# > 1 ? 2 : 1))
hiddens=${*:-64 256}
rounds=${ROUNDS:-5}
repeats=${REPEATS:-3}
work=${WORK:-target/torch-examples}
py="${BATCHLAB_PEERS_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/batchlab/peers}/venv/bin/python"
if [ ! -x "$py" ]; then
  echo "no project Python environment at $py: run paper-repro peers --install --peers torch" >&2
  exit 1
fi
cargo build --release -q -p engine -p search -p planner -p paper-repro
mkdir -p "$work"
target/release/engine record --workload tree-lstm --batch 64 --hidden 64 --seed 7 --out "$work/sst.json" >/dev/null
target/release/engine record --workload bilstm-tagger --batch 64 --hidden 64 --seed 7 --out "$work/wikiner.json" >/dev/null
target/release/search random-dag --nodes 1920 --types 5 --seed 3 --out "$work/dags.json" >/dev/null
declare -A setup=(
  [a]=batchlab_torch.examples.tree_lstm:setup [b]=batchlab_torch.examples.child_sum:setup
  [c]=batchlab_torch.examples.dag_rnn:setup [d]=batchlab_torch.examples.bilstm_tagger:setup
  [e]=batchlab_torch.examples.ggnn:setup
)
for h in $hiddens; do
  for ex in $(echo "$examples" | fold -w1); do
    w="$work/$ex-h$h"
    mkdir -p "$w"
    # The user's own recording: mark the cells, run the loop, save.
    PYTHONPATH="$PWD/engine/torch${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 "$py" - "$ex" "$h" "$work" "$w/model" <<'PY'
import sys

import torch

import batchlab_torch as bt
from batchlab_torch.examples import data

ex, hidden, work, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.set_num_threads(1)
torch.manual_seed(7)
if ex in "ab":
    trees = data.sst_trees(f"{work}/sst.json")
    if ex == "a":
        from batchlab_torch.examples.tree_lstm import TreeLSTM

        model = TreeLSTM(hidden=hidden)  # 1000 words, min(id, 999): the built-in lookup's
        cells, samples = {"leaf": model.leaf, "node": model.node, "out": model.out}, trees
    else:
        from batchlab_torch.examples.child_sum import ChildSumTreeLSTM

        model = ChildSumTreeLSTM(dim=hidden, hidden=hidden)
        cells, samples = {"cell": model.cell}, data.flatten_trees(trees)
elif ex == "c":
    from batchlab_torch.examples.dag_rnn import DagRNN

    model = DagRNN(kinds=5, hidden=hidden)
    cells, samples = {f"kind{i}": c for i, c in enumerate(model.cells)}, data.random_dags(f"{work}/dags.json", 30)
elif ex == "d":
    from batchlab_torch.examples.bilstm_tagger import BiLSTMTagger

    samples = data.wikiner_sentences(f"{work}/wikiner.json")
    model = BiLSTMTagger(1 + max(w for s in samples for w in s.words), hidden=hidden)
    cells = {"fwd": model.fwd, "bwd": model.bwd}
else:
    from batchlab_torch.examples.ggnn import GGNN, cells as ggnn_cells

    model = GGNN(hidden=hidden)
    cells, samples = ggnn_cells(model), data.molecules(64, seed=1)
rec = bt.Recorder(model, cells=cells)
with rec:
    total = sum(model(s) for s in samples)  # the mini-batch's loss, as when training
rec.save(out)
PY
    builtin=()
    if [ "$ex" = a ]; then
      target/release/engine record --workload tree-lstm --batch 64 --hidden "$h" --seed 7 --out "$w/builtin.json" >/dev/null
      builtin=(--builtin "$w/builtin.json")
    fi
    target/release/paper-repro model --model "$w/model" "${builtin[@]}" --torch "${setup[$ex]}" \
      --rounds "$rounds" --repeats "$repeats" --out "$out/$ex-h$h"
  done
done
