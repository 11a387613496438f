"""The peer ``torch-levels`` against the hand-written level program
(``engine/torch/batchlab_torch/examples/tree_lstm_levels.py``) on the same
trees and weights, interleaved in one process on one thread.

::

    B=target/release/engine
    $B record --workload tree-lstm --batch 64 --hidden 64 --seed 7 --out /tmp/t.json
    $B export-model --trace /tmp/t.json --seed 7 --gradients --out /tmp/t.safetensors
    PYTHONPATH=paper-repro/peers:engine/torch ~/.cache/batchlab/peers/venv/bin/python \\
        scripts/torch-levels-vs-example.py /tmp/t.safetensors --repeats 11 [--train]

The example's ``TreeLSTM`` gets the export's weights (its ``iou`` and
``U_l``/``U_r`` are the export's gate matrices stacked in the cell's gate
order) and the export's trees (a lookup's row is the leaf's word, a loss
node's label its node's label), so all three systems compute the same loss.
Systems, each timed from its first op to the loss (and the backward with
``--train``), in an order rotated every repeat after one warm-up each:

- ``torch-levels``: the peer's ``run_once`` (its collate step is done at
  construction);
- ``example``: ``tree_lstm_levels.losses`` summed, what
  ``batchlab_peers.torch_bench`` times for the example's ``levels`` baseline
  (its ``flatten`` of the trees included);
- ``example, flattened before``: the same program with ``flatten`` done
  once before, as ``torch-levels``' collate step is.

Inference runs under ``torch.no_grad()`` as ``torch_bench`` runs it.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import torch
from batchlab_peers.export import Export
from batchlab_peers.levels import LevelsPeer
from batchlab_torch.examples import tree_lstm_levels
from batchlab_torch.examples.data import Tree
from batchlab_torch.examples.tree_lstm import TreeLSTM

#: The internal cell's gates in the order ``Node`` chunks them.
GATES = ("i", "fl", "fr", "o", "u")


def example_model(e: Export) -> TreeLSTM:
    """The example's model holding the export's weights."""
    by_role = {
        r["role"]: {p["name"]: torch.from_numpy(e.param(p)) for p in r["params"]}
        for r in e.roles
    }
    emb, leaf, node, out = (
        by_role[k]
        for k in (
            "embed.word",
            "tree_lstm.leaf",
            "tree_lstm.internal",
            "sentiment.loss",
        )
    )
    vocab, hidden = emb["E"].shape
    m = TreeLSTM(vocab=vocab, hidden=hidden, classes=out["W"].shape[0])
    with torch.no_grad():
        m.embed.weight.copy_(emb["E"])
        m.leaf.iou.weight.copy_(torch.cat([leaf["W_i"], leaf["W_o"], leaf["W_u"]]))
        m.leaf.iou.bias.copy_(torch.cat([leaf["b_i"], leaf["b_o"], leaf["b_u"]]))
        m.node.U_l.weight.copy_(torch.cat([node[f"U{g}_l"] for g in GATES]))
        m.node.U_l.bias.copy_(torch.cat([node[f"b_{g}"] for g in GATES]))
        m.node.U_r.weight.copy_(torch.cat([node[f"U{g}_r"] for g in GATES]))
        m.out.proj.weight.copy_(out["W"])
        m.out.proj.bias.copy_(out["b"])
    return m


def example_trees(e: Export, vocab: int, classes: int) -> list[Tree]:
    """The export's trees, roots in node order."""
    made: dict[int, Tree | int] = {}
    read_by_a_cell: set[int] = set()
    for i, n in enumerate(e.nodes):
        role = e.roles[n["role"]]["role"]
        if role == "embed.word":
            made[i] = n["row"] % vocab
        elif role == "tree_lstm.leaf":
            made[i] = Tree(0, word=made[n["ports"][0][0]])
        elif role == "tree_lstm.internal":
            left, right = n["ports"][0][0], n["ports"][1][0]
            made[i] = Tree(0, children=[made[left], made[right]])
            read_by_a_cell.update((left, right))
        elif role == "sentiment.loss":
            made[n["ports"][0][0]].label = n["label"] % classes
    return [
        t for i, t in made.items() if isinstance(t, Tree) and i not in read_by_a_cell
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export", help="a tree-lstm export (engine export-model)")
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument(
        "--train", action="store_true", help="time the backward of the loss too"
    )
    a = ap.parse_args()
    torch.set_num_threads(1)
    e = Export.read(a.export)
    m = example_model(e)
    trees = example_trees(e, m.vocab, m.out.proj.out_features)
    hidden = m.leaf.iou.out_features // 3
    print(
        f"{len(trees)} trees, {sum(t.size() for t in trees)} tree nodes, hidden {hidden}, train {a.train}"
    )
    lv = tree_lstm_levels.flatten(trees, m.vocab)

    def flattened_before() -> torch.Tensor:
        return sum(tree_lstm_levels.level_losses(m, lv))

    def timed(fn: Callable[[], torch.Tensor]) -> tuple[float, float]:
        m.zero_grad(set_to_none=True)
        t = time.perf_counter()
        if a.train:
            loss = fn()
            loss.backward()
        else:
            with torch.no_grad():
                loss = fn()
        return time.perf_counter() - t, float(loss.detach())

    peer = LevelsPeer(e, 1, train=a.train)

    def levels() -> tuple[float, float]:
        r = peer.run_once()
        return r["total_s"], r["loss"]

    systems: dict[str, Callable[[], tuple[float, float]]] = {
        "torch-levels": levels,
        "example": lambda: timed(lambda: sum(tree_lstm_levels.losses(m, trees))),
        "example, flattened before": lambda: timed(flattened_before),
    }
    names = list(systems)
    times: dict[str, list[float]] = {k: [] for k in names}
    for k in names:
        print(
            f"  {k}: loss {systems[k]()[1]:.6f} (reference {e.header['reference_loss']:.6f})"
        )
    for rep in range(a.repeats):
        for k in names[rep % 3 :] + names[: rep % 3]:
            gc.collect()
            times[k].append(systems[k]()[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in names:
        print(
            f"{k}: median {med[k] * 1e3:.2f} ms (least {min(times[k]) * 1e3:.2f}, most {max(times[k]) * 1e3:.2f})"
        )
    print(
        f"example ÷ torch-levels: {med['example'] / med['torch-levels']:.2f}; "
        f"flattened before ÷ torch-levels: {med['example, flattened before'] / med['torch-levels']:.2f}"
    )


if __name__ == "__main__":
    main()
