"""One test body per device: bt.run on the model's device (CPU always,
CUDA where PyTorch sees one) gives the eager loop's outputs and gradients,
with and without autograd."""

from __future__ import annotations

import pytest
import torch

import batchlab_torch as bt
from batchlab_torch.examples.tree_lstm import TreeLSTM

from .conftest import grads, rel_err

DEVICES = ["cpu", "cuda"]


@pytest.mark.parametrize("device", DEVICES)
def test_bt_run_on_the_models_device(device: str, sst: tuple) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip(
            "SKIPPED: no CUDA device visible to PyTorch (needs an NVIDIA GPU and driver; "
            "the project venv's torch from PyPI runs on CUDA: `paper-repro peers --install --peers torch`)"
        )
    trees = sst[1]
    torch.manual_seed(0)
    with torch.device(device):  # the example makes its index tensors on the default device
        m = TreeLSTM(vocab=20000, hidden=16)
        cells = {"leaf": m.leaf, "node": m.node, "out": m.out}
        m.zero_grad()
        eager = [m(t) for t in trees]
        sum(eager).backward()
        want = grads(m)
        runner = bt.Runner(m, cells)
        for sch in ("depth", "agenda"):
            m.zero_grad()
            outs = runner.run(trees, schedule=sch)
            assert all(o.device.type == device for o in outs)
            for o, e in zip(outs, eager):
                assert rel_err(o.detach(), e.detach()) <= 1e-4, sch
            sum(outs).backward()
            got = grads(m)
            for name, g in want.items():
                assert rel_err(got[name], g) <= 1e-4, (sch, name)
        with torch.no_grad():
            outs = runner.run(trees, schedule="agenda")
        for o, e in zip(outs, eager):
            assert rel_err(o, e.detach()) <= 1e-4
