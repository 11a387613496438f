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


def setup(folder: str) -> dict:
    """For ``paper-repro model --torch``: the model at the folder's sizes,
    its cells, and the DAGs it was recorded on (rebuilt from its trace)."""
    from .data import folder_nodes, weight_shapes

    w = weight_shapes(folder)
    kinds, hidden = w["embed.weight"]
    model = DagRNN(kinds=kinds, hidden=hidden, classes=w["out.weight"][0])
    nodes = folder_nodes(folder)
    dags: dict[int, Dag] = {}
    local: dict[int, int] = {}
    for i, n in enumerate(nodes):
        inst = n.instance or 0
        if n.role.startswith("kind"):
            dag = dags.setdefault(inst, Dag([], [], 0))
            preds: list[int] = []
            if len(n.args) > 1:
                src = nodes[n.args[1]]
                preds = [local[a] for a in src.args] if src.role.startswith("sum") else [local[n.args[1]]]
            local[i] = len(dag.kinds)
            dag.kinds.append(int(n.role[4:].split("-")[0]))
            dag.preds.append(sorted(preds))
        elif n.role.startswith("cross_entropy"):
            dags[inst].label = n.label or 0
    return {
        "model": model,
        "cells": {f"kind{i}": c for i, c in enumerate(model.cells)},
        "samples": [dags[k] for k in sorted(dags)],
    }
