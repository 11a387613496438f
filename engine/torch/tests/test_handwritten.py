"""The hand-written level-by-level Tree-LSTM (the yardstick of bt.run's
machinery, examples/tree_lstm_levels.py) computes what the eager loop does."""

from __future__ import annotations

import torch

from batchlab_torch.examples import tree_lstm_levels
from batchlab_torch.examples.tree_lstm import TreeLSTM

from .conftest import grads, rel_err


def test_levels_program_equals_the_eager_loop(sst: tuple) -> None:
    torch.manual_seed(0)
    m = TreeLSTM(hidden=16)
    trees = sst[1]
    eager = [m(t) for t in trees]
    sum(eager).backward()
    want = grads(m)
    m.zero_grad()
    mine = tree_lstm_levels.losses(m, trees)
    for a, b in zip(mine, eager):
        assert rel_err(a.detach(), b.detach()) <= 1e-5
    sum(mine).backward()
    for name, g in grads(m).items():
        assert rel_err(g, want[name]) <= 1e-4, name
