"""A DAG-RNN over typed DAGs (``search random-dag``), as plain PyTorch:
every node runs the GRU cell of its kind on the sum of its predecessors'
states, the last node's state is classified."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .data import Dag


class DagRNN(nn.Module):
    def __init__(self, kinds: int = 5, hidden: int = 64, classes: int = 5) -> None:
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(kinds, hidden)
        self.cells = nn.ModuleList(nn.GRUCell(hidden, hidden) for _ in range(kinds))
        self.out = nn.Linear(hidden, classes)

    def forward(self, dag: Dag) -> torch.Tensor:
        h: list[torch.Tensor] = []
        for kind, preds in zip(dag.kinds, dag.preds):
            x = self.embed(torch.tensor([kind]))
            h_in = sum(h[p] for p in preds) if preds else torch.zeros(1, self.hidden)
            h.append(self.cells[kind](x, h_in))
        return F.cross_entropy(self.out(h[-1]), torch.tensor([dag.label]))
