"""The Tree-LSTM of :mod:`.tree_lstm`, batched by hand the way a PyTorch
practitioner writes it: the trees of a mini-batch flattened into arrays,
nodes grouped by height (leaves first, as DGL's ``prop_nodes_topo`` and
TF Fold batch), one call of each cell per level on every node of that
level, states written into one buffer in place, every node's loss
computed at the end.

It is the yardstick for ``bt.run``'s generic gather / call / scatter
machinery (``docs/torch.md``): the same modules, the same numbers, no
recording, no schedule service. The tests check it against the eager loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .data import Tree
from .tree_lstm import TreeLSTM


@dataclass
class Levels:
    """A mini-batch flattened: per node its word (leaves) or children,
    label and height; node ids in post order, trees one after another."""

    words: torch.Tensor  # per leaf level entry
    leaf_ids: torch.Tensor
    internal: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]  # per height: ids, left, right
    labels: torch.Tensor
    roots: list[int]
    n: int


def flatten(trees: list[Tree], vocab: int) -> Levels:
    words, leaf_ids, labels, roots = [], [], [], []
    by_height: dict[int, list[tuple[int, int, int]]] = {}

    def visit(t: Tree) -> tuple[int, int]:
        if t.word is not None:
            i = len(labels)
            labels.append(t.label)
            words.append(min(t.word, vocab - 1))
            leaf_ids.append(i)
            return i, 0
        (left, hl), (right, hr) = visit(t.children[0]), visit(t.children[1])
        i = len(labels)
        labels.append(t.label)
        height = 1 + max(hl, hr)
        by_height.setdefault(height, []).append((i, left, right))
        return i, height

    for t in trees:
        roots.append(visit(t)[0])
    internal = []
    for h in sorted(by_height):
        ids, left, right = zip(*by_height[h])
        internal.append((torch.tensor(ids), torch.tensor(left), torch.tensor(right)))
    return Levels(torch.tensor(words), torch.tensor(leaf_ids), internal, torch.tensor(labels), roots, len(labels))


def losses(model: TreeLSTM, trees: list[Tree]) -> list[torch.Tensor]:
    """Each tree's summed loss (what ``model(tree)`` returns), computed level by level."""
    return level_losses(model, flatten(trees, model.vocab))


def level_losses(model: TreeLSTM, lv: Levels) -> list[torch.Tensor]:
    """:func:`losses` of a mini-batch already flattened (the collate step's
    work done)."""
    hidden = model.leaf.iou.out_features // 3
    h = torch.zeros(lv.n, hidden)
    c = torch.zeros(lv.n, hidden)
    h[lv.leaf_ids], c[lv.leaf_ids] = model.leaf(model.embed(lv.words))
    for ids, left, right in lv.internal:
        h[ids], c[ids] = model.node(h[left], c[left], h[right], c[right])
    per_node = F.cross_entropy(model.out.proj(h), lv.labels, reduction="none")
    out, start = [], 0
    for r in lv.roots:
        out.append(per_node[start : r + 1].sum())
        start = r + 1
    return out
