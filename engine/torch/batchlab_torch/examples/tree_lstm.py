"""A binary Tree-LSTM (Tai et al. 2015) for SST sentiment, as plain PyTorch:
a recursive forward over one tree, a classifier and its loss at every node."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .data import Tree


class Leaf(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.iou = nn.Linear(hidden, 3 * hidden)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i, o, u = self.iou(x).chunk(3, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class Node(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.U_l = nn.Linear(hidden, 5 * hidden)
        self.U_r = nn.Linear(hidden, 5 * hidden, bias=False)

    def forward(
        self, h_l: torch.Tensor, c_l: torch.Tensor, h_r: torch.Tensor, c_r: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        i, f_l, f_r, o, u = (self.U_l(h_l) + self.U_r(h_r)).chunk(5, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_l) * c_l + torch.sigmoid(f_r) * c_r
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class Classify(nn.Module):
    def __init__(self, hidden: int, classes: int) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden, classes)

    def forward(self, h: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.proj(h), label)


class TreeLSTM(nn.Module):
    def __init__(self, vocab: int = 1000, hidden: int = 64, classes: int = 5) -> None:
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, hidden)
        self.leaf = Leaf(hidden)
        self.node = Node(hidden)
        self.out = Classify(hidden, classes)

    def forward(self, tree: Tree) -> torch.Tensor:
        losses = []

        def visit(t: Tree) -> tuple[torch.Tensor, torch.Tensor]:
            if t.word is not None:
                word = torch.tensor([min(t.word, self.vocab - 1)])
                h, c = self.leaf(self.embed(word))
            else:
                (h_l, c_l), (h_r, c_r) = visit(t.children[0]), visit(t.children[1])
                h, c = self.node(h_l, c_l, h_r, c_r)
            losses.append(self.out(h, torch.tensor([t.label])))
            return h, c

        visit(tree)
        return torch.stack(losses).sum()


class TreeLSTMPredict(nn.Module):
    """For evaluating a :class:`TreeLSTM`: the same visit with the model's
    own ``embed``, ``leaf`` and ``node``, returning every node's logits
    (``model.out.proj(h)``, ``[1, classes]``) in post-order, the root last,
    instead of the loss (which needs the labels and hides the prediction).
    It holds the model, so it always sees the trained weights; its cells
    for ``bt.run`` are :meth:`cells`."""

    def __init__(self, model: TreeLSTM) -> None:
        super().__init__()
        self.model = model

    def cells(self) -> dict[str, nn.Module]:
        m = self.model
        return {"leaf": m.leaf, "node": m.node, "proj": m.out.proj}

    def forward(self, tree: Tree) -> list[torch.Tensor]:
        m = self.model
        logits: list[torch.Tensor] = []

        def visit(t: Tree) -> tuple[torch.Tensor, torch.Tensor]:
            if t.word is not None:
                h, c = m.leaf(m.embed(torch.tensor([min(t.word, m.vocab - 1)])))
            else:
                (h_l, c_l), (h_r, c_r) = visit(t.children[0]), visit(t.children[1])
                h, c = m.node(h_l, c_l, h_r, c_r)
            logits.append(m.out.proj(h))
            return h, c

        visit(tree)
        return logits


def setup(folder: str) -> dict:
    """For ``paper-repro model --torch``: the model at the folder's sizes,
    its cells, the trees it was recorded on (rebuilt from the folder's
    trace), and the hand-written level-by-level program to compare with."""
    from . import tree_lstm_levels
    from .data import folder_nodes, weight_shapes

    w = weight_shapes(folder)
    vocab, hidden = w["embed.weight"]
    model = TreeLSTM(vocab=vocab, hidden=hidden, classes=w["out.proj.weight"][0])
    nodes = folder_nodes(folder)
    made: dict[int, Tree] = {}
    roots: dict[int, Tree] = {}
    for i, n in enumerate(nodes):
        if n.role == "leaf":
            made[i] = Tree(0, word=nodes[n.args[0]].id)
        elif n.role == "node":
            made[i] = Tree(0, children=[made[a] for a in n.args])
        elif n.role.startswith("out"):
            made[n.args[0]].label = n.label or 0
        if i in made and n.instance is not None:
            roots[n.instance] = made[i]
    trees = [roots[k] for k in sorted(roots)]
    return {
        "model": model,
        "cells": {"leaf": model.leaf, "node": model.node, "out": model.out},
        "samples": trees,
        "baselines": {"levels": lambda s: tree_lstm_levels.losses(model, s)},
    }
