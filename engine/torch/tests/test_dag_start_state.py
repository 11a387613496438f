"""Regressions from a DAG-RNN written as a new user writes it: a learned
start state `nn.Parameter(torch.zeros(1, H))` given to a cell where a node
has no parent, and the mean over a node's parents, which for one parent is
a mean of one value."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import batchlab_torch as bt

from .conftest import run, run_json

H = 8


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, H)
        self.gru = nn.GRUCell(H, H)

    def forward(self, tok: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.gru(self.emb(tok), h)


class Predict(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(H, 3)

    def forward(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.nll_loss(F.log_softmax(self.lin(h), dim=-1), y)


class DagRNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.start = nn.Parameter(torch.randn(1, H))
        self.step = Step()
        self.pred = Predict()

    def forward(self, dag: list[tuple[int, list[int], int]]) -> torch.Tensor:
        hs, losses = [], []
        for tok, parents, y in dag:
            h_in = torch.stack([hs[p] for p in parents]).mean(0) if parents else self.start
            h = self.step(torch.tensor([tok]), h_in)
            hs.append(h)
            losses.append(self.pred(h, torch.tensor([y])))
        return torch.stack(losses).sum()


DAGS = [
    [(1, [], 0), (2, [0], 1), (3, [0, 1], 2), (4, [2], 0)],
    [(5, [], 1), (6, [0], 2), (7, [1], 0), (8, [0, 1, 2], 1)],
]


def test_a_start_state_parameter_read_as_a_vector_and_a_mean_of_one_parent_replay(engine: str, tmp_path: Path) -> None:
    torch.manual_seed(2)
    m = DagRNN()
    rec = bt.Recorder(m, cells={"step": m.step, "pred": m.pred})
    with rec:
        sum(m(d) for d in DAGS)
    folder = str(tmp_path / "m")
    rec.save(folder)
    # The start state is declared at its batchlab shape; the weights file
    # keeps PyTorch's [1, H] (the same floats).
    assert '{name: "start", shape: [8]}' in (tmp_path / "m" / "cells" / "step.yaml").read_text()
    # A mean of one parent is a copy (batchlab's mean takes two or more).
    assert "op: sum" in (tmp_path / "m" / "cells" / "mean.yaml").read_text()
    for ex in ("reference", "cavs", "dynet"):
        r = run_json(engine, "replay", "--model", folder, "--executor", ex, "--train", "--check")
        assert r["expected"]["passed"] and r["expected_gradients"][0] <= 1e-4, (ex, r["expected"])
    run(engine, "train", "--model", folder, "--epochs", "2", "--batch", "2")


def test_a_parameter_read_both_as_a_vector_and_as_a_matrix_names_it() -> None:
    class Both(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(1, H))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.tanh(x * self.w), F.linear(x, self.w)

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(4, H)
            self.cell = Both()

        def forward(self, w: int) -> torch.Tensor:
            a, b = self.cell(self.emb(torch.tensor([w])))
            return a.sum() + b.sum()

    m = M()
    with pytest.raises(bt.RecordError, match=r"parameter cell.w is read both as a vector and as a matrix"):
        rec = bt.Recorder(m, cells={"cell": m.cell})
        with rec:
            m(1)
