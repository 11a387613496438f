"""bt.run's discovery of new samples (placeholders, no TorchFunctionMode,
the model's parameters as placeholders while it runs): what it takes at
once, what it still refuses, and that it leaves the model as it found it."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import batchlab_torch as bt

from .conftest import grads, rel_err

H = 6


class Cell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2 * H, H)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(torch.cat([x, h], dim=-1)))


class Chain(nn.Module):
    """A GRU-like chain over a word list, its start state zeros, a loss per
    sequence; ``variant`` makes it do one thing discovery must refuse."""

    def __init__(self, variant: str = "") -> None:
        super().__init__()
        self.embed = nn.Embedding(10, H, padding_idx=0)
        self.cell = Cell()
        self.out = nn.Linear(H, 3)
        self.h0 = nn.Parameter(torch.randn(1, H))
        self.variant = variant

    def forward(self, words: list[int]) -> torch.Tensor:
        h = torch.zeros(1, H)
        if self.variant == "derived":
            h = torch.tanh(self.h0)  # computed from a parameter outside every cell
        if self.variant == "float-input":
            h = torch.ones(1, H)  # a float tensor no recorded call made
        for w in words:
            h = self.cell(self.embed(torch.tensor([w])), h)
            if self.variant == "branch" and h.sum() > 0:  # control flow on a value
                h = self.cell(self.embed(torch.tensor([w])), h)
        return F.cross_entropy(self.out(h), torch.tensor([len(words) % 3]))


SAMPLES = [[1, 2, 3], [4, 0], [5, 6, 7, 8], [9]]


def fresh(samples: list[list[int]]) -> list[list[int]]:
    """New sample objects, as a data loader yields every epoch."""
    return copy.deepcopy(samples)


@pytest.mark.parametrize("cache", [True, False])
def test_new_sample_objects_every_mini_batch_give_the_eager_loop(cache: bool) -> None:
    torch.manual_seed(3)
    m = Chain()
    runner = bt.Runner(m, {"cell": m.cell}, cache=cache)
    for _ in range(3):
        samples = fresh(SAMPLES)
        m.zero_grad()
        eager = [m(s) for s in samples]
        sum(eager).backward()
        want = grads(m)
        m.zero_grad()
        got = runner.run(fresh(SAMPLES), "agenda")
        sum(got).backward()
        for g, e in zip(got, eager):
            assert rel_err(g.detach(), e.detach()) <= 1e-5
        for name, g in grads(m).items():
            assert rel_err(g, want[name]) <= 1e-5, name
        assert runner.stats.discovered == len(SAMPLES)  # new objects: discovered, cache or not
    same = fresh(SAMPLES)
    with torch.no_grad():
        runner.run(same, "agenda")
        runner.run(same, "agenda")
    # The same objects again: kept with the cache, discovered again without.
    assert runner.stats.discovered == (0 if cache else len(SAMPLES))


def test_discovery_leaves_the_model_as_it_found_it() -> None:
    m = Chain()
    params = {n: p for n, p in m.named_parameters()}
    classes = {n: type(mod) for n, mod in m.named_modules()}
    runner = bt.Runner(m, {"cell": m.cell}, cache=False)
    with torch.no_grad():
        runner.run(SAMPLES, "depth")
    assert {n: p for n, p in m.named_parameters()} == params
    assert all(p is params[n] for n, p in m.named_parameters())
    assert {n: type(mod) for n, mod in m.named_modules()} == classes
    # ... also after the user's forward fails mid-discovery.
    bad = Chain("branch")
    bad_params = dict(bad.named_parameters())
    with pytest.raises(bt.RecordError):
        bt.Runner(bad, {"cell": bad.cell}, cache=False).run(SAMPLES, "depth")
    assert all(p is bad_params[n] for n, p in bad.named_parameters())
    assert type(bad.cell) is Cell and type(bad.embed) is nn.Embedding
    assert [m(s) for s in SAMPLES]  # the model still runs eagerly


@pytest.mark.parametrize(
    ("variant", "says"),
    [
        ("branch", "reads a tensor's value between cells"),
        ("derived", "computed from parameters outside every cell"),
        ("float-input", "a float tensor of shape [1, 6] that no recorded call made"),
    ],
)
def test_what_discovery_still_refuses_is_named(variant: str, says: str) -> None:
    m = Chain(variant)
    with pytest.raises(bt.RecordError, match=says.replace("[", r"\[").replace("]", r"\]")):
        bt.Runner(m, {"cell": m.cell}, cache=False).run(SAMPLES, "depth")


def test_a_lookup_keeps_its_options() -> None:
    """An unmarked nn.Embedding's shortcut passes its options (here a
    padding index: word 0's row is zeros and gets no gradient)."""
    torch.manual_seed(4)
    m = Chain()
    m.zero_grad()
    eager = [m(s) for s in SAMPLES]
    sum(eager).backward()
    want = m.embed.weight.grad.clone()
    m.zero_grad()
    got = bt.Runner(m, {"cell": m.cell}, cache=False).run(fresh(SAMPLES), "depth")
    sum(got).backward()
    assert rel_err(m.embed.weight.grad, want) <= 1e-5
    assert float(m.embed.weight.grad[0].abs().max()) == 0.0
