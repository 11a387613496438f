"""Calls between cells that practitioners write around a model's losses:
each is recorded as the built-in nodes that compute the same numbers, so
batchlab's replay and bt.run reproduce the eager loop (values, loss and
gradients), and the training loss is the user's (no stray loss nodes)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import batchlab_torch as bt

from .conftest import grads, rel_err, run_json

H = 6
SENTENCES = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [3]]


class Tagger(nn.Module):
    """A GRU over the words, a classifier per word (unmarked); ``loss(self,
    states, sentence)`` is the per-sentence loss under test."""

    def __init__(self, loss: Callable) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, H)
        self.cell = nn.GRUCell(H, H)
        self.out = nn.Linear(H, 4)
        self.loss = loss

    def forward(self, words: list[int]) -> torch.Tensor:
        h, states = None, []
        for w in words:
            h = self.cell(self.embed(torch.tensor([w])), h)
            states.append(h)
        return self.loss(self, states, words)


def tags(words: list[int]) -> torch.Tensor:
    return torch.tensor([w % 4 for w in words])


LOSSES: dict[str, Callable] = {
    # The per-sentence mean of per-word losses: Python's sum divided by the count.
    "sum-over-len": lambda m, hs, ws: (
        sum(F.cross_entropy(m.out(h), tags(ws)[i : i + 1]) for i, h in enumerate(hs)) / len(hs)
    ),
    "sum-times-reciprocal": lambda m, hs, ws: (
        (1.0 / len(hs)) * sum(F.cross_entropy(m.out(h), tags(ws)[i : i + 1]) for i, h in enumerate(hs))
    ),
    # nll_loss of log_softmax between cells: per word, and on the stacked sentence.
    "nll-log-softmax": lambda m, hs, ws: sum(
        F.nll_loss(F.log_softmax(m.out(h), dim=-1), tags(ws)[i : i + 1]) for i, h in enumerate(hs)
    ),
    "nll-log-softmax-stacked": lambda m, hs, ws: F.nll_loss(
        F.log_softmax(m.out(torch.cat(hs, dim=0)), dim=1), tags(ws), reduction="sum"
    ),
    # A loss accumulated from a constant zero, the way training loops start one.
    "tensor-zero-accumulator": lambda m, hs, ws: _accumulate(m, hs, ws),
    # A bag of states, kept as a row.
    "sum-keepdim": lambda m, hs, ws: F.cross_entropy(m.out(torch.cat(hs, dim=0).sum(0, keepdim=True)), tags(ws)[:1]),
}


def _accumulate(m: Tagger, hs: list[torch.Tensor], ws: list[int]) -> torch.Tensor:
    total = torch.tensor(0.0)
    for i, h in enumerate(hs):
        total = total + F.cross_entropy(m.out(h), tags(ws)[i : i + 1])
    return total


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_a_loss_written_between_cells_matches_pytorch(name: str, engine: str, tmp_path: Path) -> None:
    torch.manual_seed(5)
    m = Tagger(LOSSES[name])
    cells = {"cell": m.cell}
    rec = bt.Recorder(m, cells=cells)
    with rec:
        total = sum(m(s) for s in SENTENCES)
    rec.save(str(tmp_path / "m"))
    # The loop's sum is not part of the graph: the training loss is the sum
    # of what each call returned, one loss node per sentence (no stray ones).
    assert loss_nodes(tmp_path / "m") == len(SENTENCES)
    r = run_json(engine, "replay", "--model", str(tmp_path / "m"), "--executor", "cavs", "--train", "--check")
    assert r["expected"]["passed"] and r["expected_gradients"][0] <= 1e-4, r["expected"]
    want_loss = float(total.detach())
    assert abs(r["loss"] - want_loss) <= 1e-4 * abs(want_loss), (r["loss"], want_loss)

    m.zero_grad()
    eager = [m(s) for s in SENTENCES]
    sum(eager).backward()
    want = grads(m)
    m.zero_grad()
    got = bt.run(m, SENTENCES, cells=cells, schedule="agenda")
    for g, e in zip(got, eager):
        assert g.shape == e.shape and rel_err(g.detach(), e.detach()) <= 1e-4
    sum(got).backward()
    for pname, g in grads(m).items():
        assert rel_err(g, want[pname]) <= 1e-4, pname


def loss_nodes(folder: Path) -> int:
    """The number of loss nodes in a model folder's trace."""
    roles = json.loads((folder / "model.json").read_text())["roles"]
    losses = {r["type"] for r in roles if r["loss"]}
    trace = json.loads((folder / "trace.json").read_text())
    loss_ids = {i for i, t in enumerate(trace["types"]) if t["name"] in losses}
    return sum(1 for n in trace["nodes"] if n["type"] in loss_ids)


def test_nll_loss_of_log_softmax_between_cells_is_a_cross_entropy(tmp_path: Path) -> None:
    torch.manual_seed(5)
    m = Tagger(LOSSES["nll-log-softmax-stacked"])
    rec = bt.Recorder(m, cells={"cell": m.cell})
    with rec:
        sum(m(s) for s in SENTENCES)
    rec.save(str(tmp_path / "m"))
    types = {r["type"] for r in json.loads((tmp_path / "m" / "model.json").read_text())["roles"]}
    assert any(t.startswith("cross_entropy") for t in types) and not any("log_softmax" in t for t in types), types
