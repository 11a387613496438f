"""A BiLSTM tagger (Huang et al. 2015; ED-Batch's and VPPS's BiLSTM tagger)
as plain PyTorch, written the way a practitioner writes it: the sentence is
embedded at once, two ``nn.LSTMCell`` loops run forward and backward, and
the tag classifier and the loss run on the whole sentence's states."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .data import Sentence


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab: int, hidden: int = 64, tags: int = 9) -> None:
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(vocab, hidden)
        self.fwd = nn.LSTMCell(hidden, hidden)
        self.bwd = nn.LSTMCell(hidden, hidden)
        self.mlp = nn.Linear(2 * hidden, hidden)
        self.out = nn.Linear(hidden, tags)

    def forward(self, sent: Sentence) -> torch.Tensor:
        x = self.embed(torch.tensor(sent.words))  # [n, hidden]
        n = len(sent.words)
        h = c = torch.zeros(1, self.hidden)
        hf = []
        for t in range(n):
            h, c = self.fwd(x[t : t + 1], (h, c))
            hf.append(h)
        h = c = torch.zeros(1, self.hidden)
        hb: list[torch.Tensor] = []
        for t in reversed(range(n)):
            h, c = self.bwd(x[t : t + 1], (h, c))
            hb.insert(0, h)
        m = torch.tanh(self.mlp(torch.cat([torch.cat(hf), torch.cat(hb)], dim=1)))
        return F.cross_entropy(self.out(m), torch.tensor(sent.tags), reduction="sum")


def setup(folder: str) -> dict:
    """For ``paper-repro model --torch``: the model at the folder's sizes,
    its cells, and the sentences it was recorded on (rebuilt from its trace)."""
    from .data import folder_nodes, weight_shapes

    w = weight_shapes(folder)
    vocab, hidden = w["embed.weight"]
    model = BiLSTMTagger(vocab, hidden, tags=w["out.weight"][0])
    sents: dict[int, Sentence] = {}
    for n in folder_nodes(folder):
        s = sents.setdefault(n.instance or 0, Sentence([], []))
        if n.role.startswith("embedding"):
            s.words.append(n.id or 0)
        elif n.role.startswith("cross_entropy"):
            s.tags.append(n.label or 0)
    return {"model": model, "cells": {"fwd": model.fwd, "bwd": model.bwd}, "samples": [sents[k] for k in sorted(sents)]}
