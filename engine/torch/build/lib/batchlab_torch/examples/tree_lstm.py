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
