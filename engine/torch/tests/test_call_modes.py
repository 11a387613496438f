"""bt.run's three ways to run a batch of one kind (direct, vmap, one call
per row), each chosen where it is right and each equal to the eager loop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
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


class Scorer(nn.Module):
    """A loss written for one instance: the cross entropy of its one row
    (called on a batch, the mean would mix the rows)."""

    def __init__(self, weight: torch.Tensor | None = None) -> None:
        super().__init__()
        self.proj = nn.Linear(H, 3)
        self.weight = weight

    def forward(self, h: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.proj(h), label, weight=self.weight)


class Scored(nn.Module):
    def __init__(self, weight: torch.Tensor | None = None) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, H)
        self.step = nn.Linear(H, H)
        self.score = Scorer(weight)

    def forward(self, seq: list[tuple[int, int]]) -> torch.Tensor:
        h = torch.zeros(1, H)
        losses = []
        for w, y in seq:
            h = torch.tanh(self.step(self.embed(torch.tensor([w]))) + h)
            losses.append(self.score(h, torch.tensor([y])))
        return torch.stack(losses).sum()


@pytest.mark.parametrize(("weight", "mode"), [(None, "rows"), (torch.tensor([0.5, 1.0, 2.0]), "vmap")])
def test_a_per_instance_loss_runs_directly_with_per_row_losses(weight: torch.Tensor | None, mode: str) -> None:
    torch.manual_seed(5)
    m = Scored(weight)
    seqs = [[(1, 0), (2, 2), (3, 1)], [(4, 1), (5, 0)], [(6, 2), (7, 2), (8, 0), (9, 1)]]
    m.zero_grad()
    eager = [m(s) for s in seqs]
    sum(eager).backward()
    want = grads(m)
    runner = bt.Runner(m, {"step": m.step, "score": m.score})
    m.zero_grad()
    outs = runner.run(seqs, schedule="depth")
    for o, e in zip(outs, eager):
        assert rel_err(o.detach(), e.detach()) <= 1e-5
    sum(outs).backward()
    for name, g in grads(m).items():
        assert rel_err(g, want[name]) <= 1e-5, name
    # A weighted mean divides by the label's weight: per row that is not
    # the weighted loss, so that kind runs under vmap.
    assert {k[1]: v.mode for k, v in runner.known.items() if k[0] == "cell"}["score"] == mode


def test_per_row_losses_are_each_rows_own_call_ignored_targets_included() -> None:
    from batchlab_torch._running.execute import _RowLosses

    torch.manual_seed(1)
    logits = torch.randn(5, 4)
    labels = torch.tensor([0, 3, -100, 2, 1])
    for loss in (F.cross_entropy, F.nll_loss):
        for reduction in ("mean", "sum"):
            one = torch.stack([loss(logits[r : r + 1], labels[r : r + 1], reduction=reduction) for r in range(5)])
            with _RowLosses():
                rows = loss(logits, labels, reduction=reduction)
            torch.testing.assert_close(rows, one, equal_nan=True)
