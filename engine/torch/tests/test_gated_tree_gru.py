"""A model written the way practitioners write one, not among the examples:
an N-ary Tree-GRU whose node gates each child's state before summing them
(attention-like, feature-wise), over trees of any arity.

What it exercises, each once a bug: the leaves are an ``nn.GRUCell`` with no
state (its hidden bias sliced beside the gate pre-activation: the planner
batched both slices, which broke edbatch); the node cell stacks its
children with ``torch.cat(hs, dim=0)``, gates the matrix row-wise and sums
it with ``keepdim``; each tree's loss is the mean over its nodes of
``nll_loss(log_softmax(...))``, made between cells (``sum(losses) /
len(losses)``)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .pipeline import full

H, VOCAB, CLASSES = 8, 20, 3


@dataclass
class Tree:
    word: int
    label: int
    children: list[Tree] = field(default_factory=list)


def random_tree(rng: random.Random, depth: int = 0) -> Tree:
    arity = 0 if depth >= 3 else rng.choice([0, 1, 2, 3])
    return Tree(rng.randrange(VOCAB), rng.randrange(CLASSES), [random_tree(rng, depth + 1) for _ in range(arity)])


class GatedNode(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate_x = nn.Linear(H, H)
        self.gate_h = nn.Linear(H, H, bias=False)
        self.gru = nn.GRUCell(H, H)

    def forward(self, x: torch.Tensor, hs: list[torch.Tensor]) -> torch.Tensor:
        kids = torch.cat(hs, dim=0)  # [k, H]
        gates = torch.sigmoid(self.gate_h(kids) + self.gate_x(x))
        return self.gru(x, (gates * kids).sum(dim=0, keepdim=True))


class GatedTreeGRU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, H)
        self.leaf = nn.GRUCell(H, H)
        self.node = GatedNode()
        self.out = nn.Linear(H, CLASSES)

    def encode(self, t: Tree, losses: list[torch.Tensor]) -> torch.Tensor:
        x = self.embed(torch.tensor([t.word]))
        h = self.node(x, [self.encode(c, losses) for c in t.children]) if t.children else self.leaf(x)
        losses.append(F.nll_loss(F.log_softmax(self.out(h), dim=-1), torch.tensor([t.label])))
        return h

    def forward(self, t: Tree) -> torch.Tensor:
        losses: list[torch.Tensor] = []
        self.encode(t, losses)
        return sum(losses) / len(losses)


def make() -> tuple[torch.nn.Module, dict]:
    m = GatedTreeGRU()
    return m, {"leaf": m.leaf, "node": m.node}


def test_gated_tree_gru_goes_through_the_pipeline(engine: str, search: str, planner: str, tmp_path: Path) -> None:
    rng = random.Random(11)
    trees = [random_tree(rng) for _ in range(24)]
    assert any(len(t.children) == 3 for t in trees) and any(not t.children for t in trees)
    r = full(engine, search, planner, make, trees, tmp_path)
    assert r["batches"]["agenda"] > 0
