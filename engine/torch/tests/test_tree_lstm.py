"""Example (a): a Tree-LSTM written as plain PyTorch, recorded on the same
SST trees as `engine record --workload tree-lstm`, has the built-in's
structure exactly, and goes through the whole pipeline."""

from __future__ import annotations

from pathlib import Path

import torch

from batchlab_torch.examples.tree_lstm import TreeLSTM

from .conftest import run_json
from .pipeline import full, record


def make() -> tuple[torch.nn.Module, dict]:
    m = TreeLSTM(hidden=16)
    return m, {"leaf": m.leaf, "node": m.node, "out": m.out}


def test_recorded_tree_lstm_has_the_builtin_structure(engine: str, sst: tuple, tmp_path: Path) -> None:
    trace, trees = sst
    model, cells = make()
    record(model, cells, trees, tmp_path / "m")
    mine = run_json(engine, "inspect", "--model", str(tmp_path / "m"))
    builtin = run_json(engine, "inspect", str(trace))
    for key in ("edges", "instances", "depth", "lower_bound"):
        assert mine[key] == builtin[key], key
    # The built-in sums every tree's losses in one node; a recording keeps
    # what each call of the model returns, each tree's sum (the loop that
    # sums them is not part of the graph): one sum node per tree.
    assert mine["nodes"] == builtin["nodes"] - 1 + len(trees)
    per_type = sorted(t["nodes"] for t in mine["types"])
    assert per_type == sorted([t["nodes"] for t in builtin["types"] if t["nodes"] != 1] + [len(trees)])
    assert len(mine["types"]) == len(builtin["types"])
    assert (mine["data_ids"], mine["data_labels"]) == (builtin["data_ids"], builtin["data_labels"])


def test_tree_lstm_goes_through_the_pipeline(
    engine: str, search: str, planner: str, sst: tuple, tmp_path: Path
) -> None:
    _, trees = sst
    r = full(engine, search, planner, make, trees, tmp_path)
    assert max(r["errors"].values()) <= 1e-4
    assert r["batches"]["depth"] >= r["batches"][next(k for k in r["batches"] if k.endswith(".yaml"))]
