"""A Child-Sum Tree-LSTM (Tai et al. 2015, sec. 3.1) over trees whose nodes
have any number of children, as plain PyTorch: a recursive forward, the
cell called with the lists of its children's states, a loss at the root."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .data import Tree


class ChildSumCell(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.iou_x = nn.Linear(dim, 3 * hidden)
        self.iou_h = nn.Linear(hidden, 3 * hidden, bias=False)
        self.f_x = nn.Linear(dim, hidden)
        self.f_h = nn.Linear(hidden, hidden, bias=False)

    def forward(
        self, x: torch.Tensor, child_h: list[torch.Tensor], child_c: list[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h_sum = sum(child_h) if child_h else torch.zeros(1, self.hidden)
        i, o, u = (self.iou_x(x) + self.iou_h(h_sum)).chunk(3, dim=-1)
        i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
        fx = self.f_x(x)
        c = i * u + sum(torch.sigmoid(fx + self.f_h(h_k)) * c_k for h_k, c_k in zip(child_h, child_c))
        h = o * torch.tanh(c)
        return h, c


class ChildSumTreeLSTM(nn.Module):
    def __init__(self, vocab: int = 1000, dim: int = 64, hidden: int = 64, classes: int = 5) -> None:
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, dim)
        self.cell = ChildSumCell(dim, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, tree: Tree) -> torch.Tensor:
        def visit(t: Tree) -> tuple[torch.Tensor, torch.Tensor]:
            states = [visit(c) for c in t.children]
            x = self.embed(torch.tensor([min(head(t), self.vocab - 1)]))
            return self.cell(x, [h for h, _ in states], [c for _, c in states])

        h, _ = visit(tree)
        return F.cross_entropy(self.out(h), torch.tensor([tree.label]))


def head(t: Tree) -> int:
    """A node's word: a leaf's own, an internal node's first leaf's (its
    head, as a dependency tree has one word per node)."""
    while t.word is None:
        t = t.children[0]
    return t.word


def setup(folder: str) -> dict:
    """For ``paper-repro model --torch``: the model at the folder's sizes,
    its cell, and the trees it was recorded on (rebuilt from its trace)."""
    from .data import folder_nodes, weight_shapes

    w = weight_shapes(folder)
    vocab, dim = w["embed.weight"]
    hidden = w["cell.f_h.weight"][0]
    model = ChildSumTreeLSTM(vocab=vocab, dim=dim, hidden=hidden, classes=w["out.weight"][0])
    nodes = folder_nodes(folder)
    made: dict[int, Tree] = {}
    roots: dict[int, Tree] = {}
    for i, n in enumerate(nodes):
        if n.role == "cell" or n.role.startswith("cell-"):
            kids = [made[a] for a in n.args[1:]]
            made[i] = Tree(0, children=kids) if kids else Tree(0, word=nodes[n.args[0]].id)
            roots[n.instance or 0] = made[i]
        elif n.role.startswith("cross_entropy"):
            roots[n.instance or 0].label = n.label or 0
    return {"model": model, "cells": {"cell": model.cell}, "samples": [roots[k] for k in sorted(roots)]}
