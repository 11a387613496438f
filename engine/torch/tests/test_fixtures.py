"""The model folders committed for batchlab's Rust tests and fuzz seeds
(engine/core/tests/fixtures/model-*) are what the recorder writes today:
recorded again here and compared file by file (the manifest without the
versions it records). `BATCHLAB_UPDATE_FIXTURES=1` rewrites them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

import batchlab_torch as bt
from batchlab_torch.examples.dag_rnn import DagRNN
from batchlab_torch.examples.data import random_dags, sst_trees
from batchlab_torch.examples.tree_lstm import TreeLSTM

from .conftest import run

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "engine" / "core" / "tests" / "fixtures"


def tree(engine: str, search: str, tmp: Path) -> tuple[torch.nn.Module, dict, list]:
    t = tmp / "t.json"
    run(engine, "record", "--workload", "tree-lstm", "--batch", "2", "--hidden", "4", "--seed", "3", "--out", str(t))
    torch.manual_seed(0)
    m = TreeLSTM(vocab=50, hidden=4)
    return m, {"leaf": m.leaf, "node": m.node, "out": m.out}, sst_trees(str(t))


def dag(engine: str, search: str, tmp: Path) -> tuple[torch.nn.Module, dict, list]:
    d = tmp / "d.json"
    run(search, "random-dag", "--nodes", "24", "--types", "3", "--seed", "5", "--out", str(d))
    torch.manual_seed(0)
    m = DagRNN(kinds=3, hidden=4)
    return m, {f"kind{i}": c for i, c in enumerate(m.cells)}, random_dags(str(d), 8)


MAKERS = {"model-tree": tree, "model-dag": dag}


def files(d: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "model.json":
                m = json.loads(data)
                m.pop("recorded_with")
                data = json.dumps(m, indent=2).encode()
            out[str(p.relative_to(d))] = data
    return out


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_committed_fixture_is_what_the_recorder_writes(
    name: str, engine: str, search: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # source lines are named relative to the checkout
    model, cells, samples = MAKERS[name](engine, search, tmp_path)
    rec = bt.Recorder(model, cells=cells)
    with rec:
        sum(model(s) for s in samples)
    out = tmp_path / name
    rec.save(str(out))
    if os.environ.get("BATCHLAB_UPDATE_FIXTURES") == "1":
        shutil.rmtree(FIXTURES / name, ignore_errors=True)
        shutil.copytree(out, FIXTURES / name)
    assert files(out) == files(FIXTURES / name), f"{name}: re-record with BATCHLAB_UPDATE_FIXTURES=1"
