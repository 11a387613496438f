"""Example (b): a Child-Sum Tree-LSTM over trees with any number of
children (not in batchlab's zoo): the cell is called with lists of child
states, so each child count is its own node type sharing one set of weights."""

from __future__ import annotations

from pathlib import Path

import torch

from batchlab_torch.examples.child_sum import ChildSumTreeLSTM
from batchlab_torch.examples.data import flatten_trees

from .conftest import run_json
from .pipeline import full


def make() -> tuple[torch.nn.Module, dict]:
    m = ChildSumTreeLSTM(dim=16, hidden=16)
    return m, {"cell": m.cell}


def test_child_sum_goes_through_the_pipeline(
    engine: str, search: str, planner: str, sst: tuple, tmp_path: Path
) -> None:
    trees = flatten_trees(sst[1])
    arities = {len(t.children) for tree in trees for t in _nodes(tree)}
    assert len(arities) >= 3, arities
    r = full(engine, search, planner, make, trees, tmp_path)
    roles = run_json(engine, "inspect", "--model", str(r["folder"]))["roles"]
    assert sum(1 for x in roles if x["role"].startswith("cell")) == len(arities)


def _nodes(t):  # type: ignore[no-untyped-def]
    yield t
    for c in t.children:
        yield from _nodes(c)
