"""Trains example (a)'s Tree-LSTM on the SST train split with an ordinary
PyTorch loop, each mini-batch's forward either the user's eager loop or
bt.run (``docs/torch.md``, "Training with bt.run")::

    python -m batchlab_torch.examples.train_sst --mode eager --epochs 5 --out eager.json
    python -m batchlab_torch.examples.train_sst --mode bt --schedule depth --epochs 5 --out bt.json
    paper-repro training-curve --report eager.json --report bt.json --out out/curves

The loop is what a PyTorch user writes: a ``Dataset`` that builds fresh
``Tree`` objects on every access (so bt.run's per-sample cache can never
help: the runner is made with ``cache=False``), a shuffling ``DataLoader``,
Adam. A step's loss is the sum over the mini-batch's trees of each tree's
summed node losses (what ``model(tree)`` returns: one cross-entropy per
node), divided by the number of trees; the epoch's ``train_loss`` is the
mean of the tree losses. The same seed gives the same initial weights and
the same mini-batch order in both modes, so the two loops can be compared
step by step.

After every epoch, outside its timed part, the dev split is scored by the
same mode under ``torch.no_grad()`` with :class:`TreeLSTMPredict` (the
trained cells, logits instead of the loss): root accuracy (5 classes) and
accuracy over all nodes. ``--out`` writes the report ``paper-repro
training-curve --report`` reads, after every epoch (atomically), plus what
the run was (seed, lr, torch version, bt.run's batches per mini-batch...).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

import batchlab_torch as bt

from .data import SST_CLASSES, Tree, sst_split
from .tree_lstm import TreeLSTM, TreeLSTMPredict


class SSTDataset(Dataset):
    """SST trees, each access a new ``Tree`` object, as a real data
    pipeline's samples are new objects every epoch."""

    def __init__(self, trees: Sequence[Tree]) -> None:
        self.trees = list(trees)

    def __len__(self) -> int:
        return len(self.trees)

    def __getitem__(self, i: int) -> Tree:
        return fresh(self.trees[i])


def fresh(t: Tree) -> Tree:
    """A copy of ``t`` made of new objects (SST trees are at most a few
    dozen levels deep: recursion is safe, as in the model's own forward)."""
    return Tree(t.label, word=t.word, children=[fresh(c) for c in t.children])


def post_order_labels(t: Tree, out: list[int]) -> list[int]:
    """The labels in :class:`TreeLSTMPredict`'s order of logits."""
    for c in t.children:
        post_order_labels(c, out)
    out.append(t.label)
    return out


def majority(trees: Sequence[Tree]) -> dict[str, float]:
    """The majority-class accuracy at the roots and over all nodes: the
    baseline a trained model must beat (as ``engine train`` reports it)."""
    roots = Counter(t.label for t in trees)
    nodes = Counter(x for t in trees for x in post_order_labels(t, []))

    def rate(c: Counter[int]) -> float:
        return max(c.values()) / sum(c.values()) if c else 0.0

    return {"root": rate(roots), "node": rate(nodes)}


Predict = Callable[[list[Tree]], list[list[torch.Tensor]]]


def evaluate(predict: Predict, trees: Sequence[Tree], chunk: int) -> tuple[float, float]:
    """Root and all-node accuracy of ``predict`` on ``trees``, ``chunk``
    trees per call, without autograd."""
    hit_root = hit_node = nodes = 0
    with torch.no_grad():
        for i in range(0, len(trees), chunk):
            part = list(trees[i : i + chunk])
            for t, logits in zip(part, predict(part)):
                ok = torch.cat(logits).argmax(-1) == torch.tensor(post_order_labels(t, []))
                hit_node += int(ok.sum())
                hit_root += int(ok[-1])  # post-order: the root is last
                nodes += len(ok)
    return hit_root / max(len(trees), 1), hit_node / max(nodes, 1)


def find_data() -> Path:
    """The checkout's ``data/``: beside this package's checkout, else under
    the working folder."""
    for d in (Path(__file__).resolve().parents[4] / "data", Path.cwd() / "data"):
        if (d / "sst-train.trees").is_file():
            return d
    raise SystemExit("train_sst: no data/sst-train.trees beside the package or in the working folder: give --data DIR")


def write_atomic(path: Path, report: dict[str, Any]) -> None:
    """Writes the report so that a reader never sees half of it (a temporary
    file in the same folder, then a rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def positive(s: str) -> int:
    n = int(s)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{s}: must be at least 1")
    return n


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m batchlab_torch.examples.train_sst", description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["eager", "bt"], default="bt", help="the mini-batch's forward (default: bt)")
    p.add_argument("--schedule", default="depth", help="bt.run's schedule: depth, agenda or FILE.yaml (default: depth)")
    p.add_argument(
        "--eval-schedule",
        help="bt.run's schedule for the dev split (default: --schedule if a policy name, else depth: "
        "a policy file is trained for the training graph's types, which the evaluation graph does not have)",
    )
    p.add_argument("--data", type=Path, help="folder of sst-{train,dev}.trees (default: the checkout's data/)")
    p.add_argument("--hidden", type=positive, default=64)
    p.add_argument("--vocab", type=positive, default=2000, help="embedding rows; rarer word ids share the last")
    p.add_argument("--batch", type=positive, default=25, help="trees per mini-batch")
    p.add_argument("--epochs", type=positive, default=5)
    p.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate")
    p.add_argument("--seed", type=int, default=1, help="initial weights and mini-batch order")
    p.add_argument("--limit", type=positive, help="train on the first N train trees only")
    p.add_argument("--dev-limit", type=positive, help="score the first N dev trees only")
    p.add_argument("--eval-batch", type=positive, default=256, help="dev trees per evaluation call")
    p.add_argument("--threads", type=positive, default=1, help="torch.set_num_threads")
    p.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        default="float32",
        help="the model's floats: float64 shows that the two modes' trajectories part by float32 rounding only",
    )
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar (none either when stderr is no terminal)"
    )
    p.add_argument("--out", type=Path, help="write the JSON report here (after every epoch)")
    a = p.parse_args(argv)
    if not (a.lr > 0 and a.lr < float("inf")):
        p.error(f"--lr {a.lr}: must be finite and above 0")
    if a.eval_schedule is None:
        a.eval_schedule = "depth" if Path(a.schedule).is_file() else a.schedule
    return a


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the training; returns the report (also written to ``--out``)."""
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    data = a.data or find_data()
    try:
        train = sst_split(data / "sst-train.trees")[: a.limit]
        dev = sst_split(data / "sst-dev.trees")[: a.dev_limit]
    except (OSError, ValueError) as e:
        raise SystemExit(f"train_sst: {e}") from None

    torch.manual_seed(a.seed)  # the initial weights: the same in both modes
    model = TreeLSTM(vocab=a.vocab, hidden=a.hidden, classes=SST_CLASSES).to(getattr(torch, a.dtype))
    predict = TreeLSTMPredict(model)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    loader = DataLoader(
        SSTDataset(train),
        batch_size=a.batch,
        shuffle=True,
        generator=torch.Generator().manual_seed(a.seed),  # its own: the order does not depend on the mode
        collate_fn=list,
    )
    if a.mode == "bt":
        runner = bt.Runner(model, {"leaf": model.leaf, "node": model.node, "out": model.out}, cache=False)
        # The dev trees are the same objects every epoch: their graphs are
        # discovered once (the cache assumes a sample's structure is fixed).
        eval_runner = bt.Runner(predict, predict.cells(), cache=True)
        schedule = a.schedule

        def forward(batch: list[Tree]) -> list[torch.Tensor]:
            return runner.run(batch, schedule)

        def predict_batch(trees: list[Tree]) -> list[list[torch.Tensor]]:
            return eval_runner.run(trees, a.eval_schedule)

        executor = f"bt.run {Path(schedule).name}"
    else:

        def forward(batch: list[Tree]) -> list[torch.Tensor]:
            return [model(t) for t in batch]

        def predict_batch(trees: list[Tree]) -> list[list[torch.Tensor]]:
            return [predict(t) for t in trees]

        executor = "eager"

    report: dict[str, Any] = {
        "workload": "tree-lstm",
        "model": "batchlab_torch.examples.tree_lstm.TreeLSTM",
        "data": "sst-train" if a.limit is None else f"sst-train (first {len(train)})",
        "train_trees": len(train),
        "dev": "sst-dev" if a.dev_limit is None else f"sst-dev (first {len(dev)})",
        "dev_trees": len(dev),
        "executor": executor,
        "mode": a.mode,
        "schedule": a.schedule if a.mode == "bt" else None,
        "eval_schedule": a.eval_schedule if a.mode == "bt" else None,
        "optimizer": "adam",
        "lr": a.lr,
        "batch": a.batch,
        "hidden": a.hidden,
        "vocab": a.vocab,
        "seed": a.seed,
        "threads": a.threads,
        "dtype": a.dtype,
        "torch": torch.__version__,
        "loss": "step: sum over the mini-batch's trees of each tree's summed node cross-entropies / trees; "
        "train_loss: the epoch's mean per tree",
        "seconds_note": "seconds: the epoch's training wall time (loader, forward, backward, step); "
        "cpu_seconds: this process's CPU time in it (not bt.run's schedule service process); "
        "eval_seconds: the dev evaluation after it",
        "dev_majority": majority(dev),
        "epochs": [],
    }
    show = not a.no_progress and sys.stderr.isatty()
    t_run = time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        model.train()
        total, trees, steps = 0.0, 0, 0
        batches = nodes = 0
        parts = {"discover": 0.0, "schedule": 0.0, "execute": 0.0}
        bar = tqdm(total=len(loader), desc=f"epoch {epoch}", disable=not show, leave=False)
        t0, c0 = time.perf_counter(), time.process_time()
        for batch in loader:
            loss = torch.stack(forward(batch)).sum() / len(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(batch)
            trees += len(batch)
            steps += 1
            if a.mode == "bt":
                st = runner.stats
                batches, nodes = batches + st.batches, nodes + st.nodes
                for k in parts:
                    parts[k] += getattr(st, k)
            bar.update()
            bar.set_postfix(loss=f"{total / trees:.3f}")
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        bar.close()
        model.eval()
        t1 = time.perf_counter()
        root, node = evaluate(predict_batch, dev, a.eval_batch)
        rec: dict[str, Any] = {
            "epoch": epoch,
            "train_loss": total / trees,
            "dev_accuracy": root,
            "dev_node_accuracy": node,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "eval_seconds": time.perf_counter() - t1,
            "steps": steps,
        }
        if a.mode == "bt":
            rec["batches_per_minibatch"] = batches / steps
            rec["nodes_per_minibatch"] = nodes / steps
            rec["bt_seconds"] = parts  # bt.run's own split of the forward passes (backward not included)
        report["epochs"].append(rec)
        report["seconds"] = time.perf_counter() - t_run
        print(
            f"epoch {epoch}: train loss {rec['train_loss']:.4f} per tree, dev root {root:.4f} all nodes {node:.4f}, "
            f"{seconds:.2f} s training ({cpu:.2f} s CPU), {rec['eval_seconds']:.2f} s dev",
            flush=True,
        )
        if a.out is not None:
            write_atomic(a.out, report)
    return report


if __name__ == "__main__":
    main()
