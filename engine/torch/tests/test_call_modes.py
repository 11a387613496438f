"""bt.run's three ways to run a batch of one kind (direct, vmap, one call
per row), each chosen where it is right and each equal to the eager loop."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import batchlab_torch as bt

from .conftest import grads, rel_err

H = 4


class Branchy(nn.Module):
    """A cell whose code branches on a value: a direct call on a batch
    branches once for all rows, and vmap cannot branch on a value at all."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(H, H)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        y = self.lin(x + h)
        return torch.tanh(y) if float(y.detach().sum()) > 0 else torch.sigmoid(y)


class Flat(nn.Module):
    """A cell written for one vector: a direct call on a batch fails, vmap
    batches it."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(H, H) / H)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.w @ h.reshape(H)).reshape(1, H)


class Chains(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, H)
        self.rowwise = nn.Linear(H, H)
        self.branchy = Branchy()
        self.flat = Flat()

    def forward(self, seq: list[int]) -> torch.Tensor:
        h = torch.zeros(1, H)
        for w in seq:
            x = self.embed(torch.tensor([w]))
            h = self.flat(self.branchy(self.rowwise(x), h))
        return h.sum()


def test_each_kind_runs_the_way_that_reproduces_it() -> None:
    torch.manual_seed(3)
    m = Chains()
    seqs = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [0, 3]]
    m.zero_grad()
    eager = [m(s) for s in seqs]
    sum(eager).backward()
    want = grads(m)
    runner = bt.Runner(m, {"rowwise": m.rowwise, "branchy": m.branchy, "flat": m.flat})
    m.zero_grad()
    outs = runner.run(seqs, schedule="depth")
    for o, e in zip(outs, eager):
        assert rel_err(o.detach(), e.detach()) <= 1e-5
    sum(outs).backward()
    got = grads(m)
    for name, g in want.items():
        assert rel_err(got[name], g) <= 1e-5, name
    st = runner.stats
    # The embedding and nn.Linear run directly on the batch; the one-vector
    # cell and h.sum() (which, called on a batch, would sum the rows too)
    # under vmap; the branching cell one row at a time.
    assert (st.direct_kinds, st.vmap_kinds, st.loop_kinds) == (2, 2, 1), st


class Doubling(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(H, H)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        x.mul_(2)  # in place: the eager loop's later readers of x see it doubled
        return torch.tanh(self.lin(x) + h)


class Reuses(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, H)
        self.cell = Doubling()

    def forward(self, seq: list[int]) -> torch.Tensor:
        h = torch.zeros(1, H)
        for w in seq:
            x = self.embed(torch.tensor([w]))
            h = self.cell(x, h) + x
        return h.sum()


def test_a_cell_that_changes_its_input_in_place_is_refused() -> None:
    m = Reuses()
    with torch.no_grad(), pytest.raises(bt.RecordError, match=r"module cell changes one of its input tensors in place"):
        bt.run(m, [[1, 2], [3, 4, 5]], cells={"cell": m.cell}, schedule="agenda")
